"""The router's window assignment against real PostgreSQL (no Kafka, no Temporal): an
event lands in exactly one window, a batch closes by count, a repeat is absorbed."""

from __future__ import annotations

import asyncio

from router.flow.windows import (
    ABSORBED,
    ASSIGNED,
    _Item,
    assign,
    listing_source,
    open_windows,
    prune,
)
from schemas.flow.spec import BatchDef, DebounceDef
from tests.integration.flow.support import seed_flow_activity, windows


def _items(*event_ids: str) -> list[_Item]:
    return [_Item(e, {"type": "t", "event_id": e}, "events", 0, i) for i, e in enumerate(event_ids)]


async def test_a_batch_closes_by_count_and_a_repeat_joins_no_second_batch(db_pool):
    batch = BatchDef(max_size=3, timeout=60)
    aid = await seed_flow_activity(db_pool, "t", {"batch": batch.model_dump()})
    out, notes = await assign(db_pool, aid, "k", "batch", batch, _items("a", "b", "c", "d"))
    assert out == [ASSIGNED] * 4
    assert [(n.new_events, n.closed) for n in notes] == [(3, True), (1, False)]
    # "b" again (a redelivery), with "e": "b" stays in the first, closed batch
    out, notes = await assign(db_pool, aid, "k", "batch", batch, _items("b", "e", "e"))
    assert out == [ABSORBED, ASSIGNED, ABSORBED]
    got = await windows(db_pool, aid)
    assert [(w["members"], w["state"], w["closed_by"]) for w in got] == [
        (["a", "b", "c"], "closed", "full"),
        (["d", "e"], "open", None),
    ]
    # the closed, not yet started batch is noted again (the first note may have been lost)
    assert [(n.window_id, n.new_events, n.closed) for n in notes] == [
        (got[0]["id"], 0, True),
        (got[1]["id"], 1, False),
    ]
    listed = await open_windows(db_pool, aid)
    assert [(w.window_id, w.state, w.size, w.key) for w in listed] == [
        (got[0]["id"], "closed", 3, "k"),
        (got[1]["id"], "open", 2, "k"),
    ]


async def test_concurrent_assignments_never_share_an_event(db_pool):
    debounce = DebounceDef(period=5)
    aid = await seed_flow_activity(db_pool, "t", {"debounce": debounce.model_dump()})
    ids = [f"e{i}" for i in range(40)]
    # four routers at once, each seeing every event (a rebalance redelivering all of them)
    results = await asyncio.gather(
        *(assign(db_pool, aid, "k", "debounce", debounce, _items(*ids)) for _ in range(4))
    )
    assert sum(o == ASSIGNED for out, _ in results for o in out) == 40
    got = await windows(db_pool, aid)
    assert len(got) == 1 and sorted(got[0]["members"]) == sorted(ids)
    assert got[0]["size"] == 40


async def test_keys_have_their_own_windows(db_pool):
    batch = BatchDef(max_size=10, timeout=60)
    aid = await seed_flow_activity(db_pool, "t", {"batch": batch.model_dump()})
    await assign(db_pool, aid, "k1", "batch", batch, _items("a", "b"))
    await assign(db_pool, aid, "k2", "batch", batch, _items("c"))
    assert [(w["key"], w["members"]) for w in await windows(db_pool, aid)] == [
        ("k1", ["a", "b"]),
        ("k2", ["c"]),
    ]
    assert {w.key for w in await open_windows(db_pool)} == {"k1", "k2"}
    # ingest flow list's windows column: one not started window per key
    assert await listing_source(db_pool, aid) == [
        {"activity_id": aid, "key": "k1", "windows": 1},
        {"activity_id": aid, "key": "k2", "windows": 1},
    ]


async def test_prune_deletes_only_started_windows_past_the_retention(db_pool):
    batch = BatchDef(max_size=2, timeout=60)
    aid = await seed_flow_activity(db_pool, "t", {"batch": batch.model_dump()})
    await assign(db_pool, aid, "k", "batch", batch, _items("a", "b", "c", "d", "e"))
    first, second, _ = await windows(db_pool, aid)
    await db_pool.execute(
        "UPDATE flow_windows SET state = 'started', started_at = now() - interval '40 days'"
        " WHERE id = $1",
        first["id"],
    )
    await db_pool.execute(
        "UPDATE flow_windows SET state = 'started', started_at = now() WHERE id = $1",
        second["id"],
    )
    assert await prune(db_pool, 30) == 1
    assert [w["members"] for w in await windows(db_pool, aid)] == [["c", "d"], ["e"]]
    assert await db_pool.fetchval("SELECT count(*) FROM flow_members") == 3
    assert await prune(db_pool, 0) == 0  # 0 keeps everything
