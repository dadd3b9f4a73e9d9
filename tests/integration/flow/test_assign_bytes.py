"""Window bytes against real PostgreSQL (no Kafka, no Temporal): a batch closes by bytes
before an event would take it over its budget, a single event over the budget is a batch
of its own, the budget is shared by the activity's tasks, a debounce only counts; a
dead-lettered window writes one outbox record per member, once, and lets its events be
assigned again."""

from __future__ import annotations

import orjson
import pytest

from router.flow.windows import ABSORBED, ASSIGNED, _Item, assign, open_windows, prune
from schemas.flow.spec import BatchDef, DebounceDef, json_bytes
from tests.integration.flow.support import seed_flow_activity, windows
from workers.flow import window_dead_letters as dead_letters


def _items(sizes: dict[str, int], start: int = 0) -> list[_Item]:
    """One item per event id, its ``data.pad`` that many characters long."""
    return [
        _Item(e, {"type": "t", "event_id": e, "data": {"pad": "x" * n}}, "events", 2, start + i)
        for i, (e, n) in enumerate(sizes.items())
    ]


async def _rows(pool, aid):  # type: ignore[no-untyped-def]
    return [
        (r["state"], r["closed_by"], r["size"], r["bytes"])
        for r in await pool.fetch(
            "SELECT state, closed_by, size, bytes FROM flow_windows"
            " WHERE activity_id = $1::uuid ORDER BY id",
            aid,
        )
    ]


async def test_a_batch_closes_before_an_event_would_take_it_over_its_bytes(db_pool):
    batch = BatchDef(max_size=100, timeout=60, max_bytes=10_000)
    aid = await seed_flow_activity(db_pool, "t", {"batch": batch.model_dump()})
    items = _items({f"e{i}": 3_000 for i in range(7)})
    each = json_bytes(items[0].event)
    assert 3_000 < each < 3_100
    out, notes = await assign(db_pool, aid, "k", "batch", batch, items)
    assert out == [ASSIGNED] * 7
    # three fit in 10,000 bytes, a fourth would not: 3, 3, then 1 still open
    assert [(n.new_events, n.closed) for n in notes] == [(3, True), (3, True), (1, False)]
    assert await _rows(db_pool, aid) == [
        ("closed", "bytes", 3, 3 * each),
        ("closed", "bytes", 3, 3 * each),
        ("open", None, 1, each),
    ]
    # the open one goes on counting in the next flush, and closes before the 4th again
    more = _items({"f": 3_000, "g": 3_000, "h": 3_000}, 7)
    out, notes = await assign(db_pool, aid, "k", "batch", batch, more)
    assert out == [ASSIGNED] * 3
    held = each + json_bytes(more[0].event) + json_bytes(more[1].event)
    assert (await _rows(db_pool, aid))[2:] == [
        ("closed", "bytes", 3, held),
        ("open", None, 1, json_bytes(more[2].event)),
    ]
    assert [(n.new_events, n.closed) for n in notes] == [(2, True), (1, False)]


async def test_an_event_over_the_budget_is_a_batch_of_its_own(db_pool):
    batch = BatchDef(max_size=100, timeout=60, max_bytes=10_000)
    aid = await seed_flow_activity(db_pool, "t", {"batch": batch.model_dump()})
    out, notes = await assign(
        db_pool, aid, "k", "batch", batch, _items({"a": 100, "big": 20_000, "b": 100})
    )
    assert out == [ASSIGNED] * 3
    got = await windows(db_pool, aid)
    assert [(w["members"], w["state"], w["closed_by"]) for w in got] == [
        (["a"], "closed", "bytes"),  # closed before "big" joined it
        (["big"], "closed", "bytes"),  # over the budget alone: closed at once
        (["b"], "open", None),
    ]
    assert [n.closed for n in notes] == [True, True, False]


async def test_the_budget_is_shared_by_the_tasks_and_max_size_still_counts(
    db_pool, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr("schemas.flow.spec.WINDOW_MAX_BYTES", 20_000)
    batch = BatchDef(max_size=2, timeout=60)
    # 1 + 3 tasks (count): every task carries the batch, so each batch holds 5,000 bytes
    tasks: list[dict[str, object]] = [{"type": "noop"}, {"type": "noop", "count": 3}]
    aid = await seed_flow_activity(db_pool, "t", {"batch": batch.model_dump()}, tasks)
    await assign(
        db_pool,
        aid,
        "k",
        "batch",
        batch,
        _items({"a": 2_000, "b": 2_000, "c": 2_000, "d": 10, "e": 10}),
    )
    assert [(w["members"], w["closed_by"]) for w in await windows(db_pool, aid)] == [
        (["a", "b"], "full"),  # 4,1xx bytes: under 5,000, closed by count
        (["c", "d"], "full"),
        (["e"], None),
    ]
    monkeypatch.setattr("schemas.flow.spec.WINDOW_MAX_BYTES", 12_000)  # 3,000 per batch now
    await assign(db_pool, aid, "k", "batch", batch, _items({"f": 3_000}, 5))
    assert [(w["members"], w["closed_by"]) for w in await windows(db_pool, aid)][2:] == [
        (["e"], "bytes"),  # "f" would take it over 3,000
        (["f"], "bytes"),  # over 3,000 alone
    ]


async def test_a_debounce_counts_its_bytes_and_never_closes_by_them(db_pool):
    debounce = DebounceDef(period=5)
    aid = await seed_flow_activity(db_pool, "t", {"debounce": debounce.model_dump()})
    items = _items({f"e{i}": 400_000 for i in range(5)})  # 2 MB: five times a batch's budget
    out, _ = await assign(db_pool, aid, "k", "debounce", debounce, items)
    assert out == [ASSIGNED] * 5
    assert await _rows(db_pool, aid) == [("open", None, 5, sum(json_bytes(i.event) for i in items))]


async def test_a_dead_lettered_window_writes_its_records_once_and_frees_its_events(db_pool):
    batch = BatchDef(max_size=3, timeout=60)
    aid = await seed_flow_activity(db_pool, "t", {"batch": batch.model_dump()})
    await assign(db_pool, aid, "k", "batch", batch, _items({"a": 10, "b": 10, "c": 10, "d": 10}))
    first, _ = await windows(db_pool, aid)
    detail = "ünïcode " * 200  # cut to 1 KiB on a character boundary
    async with db_pool.acquire() as conn, conn.transaction():
        n = await dead_letters.dead_letter(
            conn, first["id"], "dlq-t", "window_start_refused", detail
        )
    assert n == 3
    async with db_pool.acquire() as conn, conn.transaction():  # a retried close: nothing twice
        assert (
            await dead_letters.dead_letter(
                conn, first["id"], "dlq-t", "window_start_refused", detail
            )
            == 0
        )
    rows = await db_pool.fetch(
        "SELECT id, topic, key, headers::text AS h, body FROM outbox ORDER BY seq"
    )
    assert [r["id"] for r in rows] == [f"flow-dlq:{first['id']}:{e}" for e in "abc"]
    assert {r["topic"] for r in rows} == {"dlq-t"}
    assert [bytes(r["key"]) for r in rows] == [b"a", b"b", b"c"]
    headers = dict(orjson.loads(rows[1]["h"]))
    assert headers["dlq_reason"] == "window_start_refused"
    assert headers["dlq_component"] == "worker"
    assert (
        headers["dlq_source_topic"],
        headers["dlq_source_partition"],
        headers["dlq_source_offset"],
    ) == ("events", "2", "1")
    assert headers["dlq_window_id"] == str(first["id"])
    assert len(headers["dlq_detail"].encode()) <= 1024 and headers["dlq_detail"].startswith(
        "ünïcode"
    )
    assert orjson.loads(rows[1]["body"]) == {
        "type": "t",
        "event_id": "b",
        "data": {"pad": "x" * 10},
    }
    state = await db_pool.fetchrow(
        "SELECT state, dlq_reason, size FROM flow_windows WHERE id = $1", first["id"]
    )
    assert tuple(state) == ("dead_lettered", "window_start_refused", 3)
    assert first["id"] not in [w.window_id for w in await open_windows(db_pool, aid)]
    # "b" again (a DLQ re-drive): assigned to the open window, not absorbed into the dead one
    out, _ = await assign(db_pool, aid, "k", "batch", batch, _items({"b": 10, "d": 10}))
    assert out == [ASSIGNED, ABSORBED]
    assert [w["members"] for w in await windows(db_pool, aid)] == [["d", "b"]]
    # pruned with the started windows, past the retention
    await db_pool.execute(
        "UPDATE flow_windows SET dead_lettered_at = now() - interval '40 days' WHERE id = $1",
        first["id"],
    )
    assert await prune(db_pool, 30) == 1
