"""flow.ordered's SQL on the real PostgreSQL (migration 0019): places in batch order,
once per workflow id; two routers at once; drops; turns; closing; release."""

from __future__ import annotations

import asyncio
import uuid

import asyncpg

from router.flow.order import OrderLines, PlaceRequest, line_rows, release
from schemas.workflow_io import RunActivityInput
from workers.flow import order_store


def _run(aid: str, eid: str) -> RunActivityInput:
    return RunActivityInput.for_event(aid, eid, {"type": "t", "event_id": eid, "data": {}})


async def test_places_follow_batch_order_per_line_and_come_back_unchanged(db_pool):
    aid = str(uuid.uuid4())
    lines = OrderLines(db_pool)
    reqs = [PlaceRequest(_run(aid, f"e{i}"), "ab"[i % 2], "t", 0, i) for i in range(6)]
    got = await lines.assign(reqs)
    assert [got[r.run.workflow_id].seq for r in reqs] == [1, 1, 2, 2, 3, 3]
    # A redelivery of part of the batch, with new runs after it: same places, then more.
    more = [PlaceRequest(_run(aid, f"e{i}"), "ab"[i % 2], "t", 0, i) for i in range(3, 8)]
    again = await lines.assign(more)
    assert [again[r.run.workflow_id].seq for r in more] == [2, 3, 3, 4, 4]
    assert await db_pool.fetchval("SELECT count(*) FROM flow_order_places") == 8


async def test_two_routers_assigning_overlapping_batches_at_once_agree(db_pool):
    """A rebalance: both read the same records (in order) from different starts; many
    lines locked in opposite batch orders never deadlock, and each record has one place."""
    aid = str(uuid.uuid4())
    keys = [f"k{i}" for i in range(20)]
    recs = [PlaceRequest(_run(aid, f"e{i}"), keys[i % 20], "t", 0, i) for i in range(200)]
    a, b = OrderLines(db_pool), OrderLines(db_pool)

    async def read(lines: OrderLines, start: int, step: int) -> None:
        for i in range(start, 200, step):
            await lines.assign(recs[i : i + step])

    # A router starts at a committed offset: everything below it was placed. Both start
    # at 0 (the new owner from the committed offset, the old one still going), with
    # different batch sizes, then two more from 100 once the first 100 are placed.
    await asyncio.gather(read(a, 0, 10), read(b, 0, 7))
    await db_pool.execute("DELETE FROM flow_order_places WHERE source_offset >= 100")
    await asyncio.gather(read(a, 100, 13), read(b, 100, 10))
    rows = await db_pool.fetch(
        "SELECT key, seq, source_offset FROM flow_order_places ORDER BY key, seq"
    )
    assert len(rows) == 200
    for key in keys:
        offsets = [r["source_offset"] for r in rows if r["key"] == key]
        assert offsets == sorted(offsets), key  # the line's order is the partition's


async def test_turns_close_drop_and_release(db_pool: asyncpg.Pool):
    aid = str(uuid.uuid4())
    lines = OrderLines(db_pool)
    runs = [_run(aid, f"x{i}") for i in range(4)]
    await lines.assign([PlaceRequest(r, "k") for r in runs])
    turn = [await order_store.turn(db_pool, r.workflow_id) for r in runs]
    assert [t.place.turn for t in turn if t] == [True, False, False, False]
    assert turn[1] and turn[1].blocker == runs[0].workflow_id
    assert await order_store.turn(db_pool, "activity-x:none") is None

    # A failed run frees nothing; its success (or a cancel) does, and names the next.
    assert await order_store.close(db_pool, runs[0].run_id, "failed") is None
    assert await order_store.close(db_pool, runs[0].run_id, "succeeded") == runs[1].workflow_id
    # A repeat closes nothing again and still names the next (a lost wake is resent).
    assert await order_store.close(db_pool, runs[0].run_id, "succeeded") == runs[1].workflow_id
    t1 = await order_store.turn(db_pool, runs[1].workflow_id)
    assert t1 is not None and t1.place.turn

    # A dropped place (its message dead-lettered) holds nothing; a dropped run's
    # redelivery gets its place back, closed.
    assert await lines.drop([runs[2].workflow_id]) == 1
    back = await lines.assign([PlaceRequest(runs[2], "k")])
    assert back[runs[2].workflow_id].done

    # runs[1] fails: it holds the line (run row failed), shown blocked, until released.
    await db_pool.execute(
        "INSERT INTO activity_runs (run_id, activity_id, workflow_id, trigger_kind, status)"
        " VALUES ($1::uuid, $2::uuid, $3, 'event', 'failed')",
        runs[1].run_id, aid, runs[1].workflow_id,
    )  # fmt: skip
    t3 = await order_store.turn(db_pool, runs[3].workflow_id)
    assert t3 is not None and t3.blocker == runs[1].workflow_id
    listed = await line_rows(db_pool, aid)
    assert listed == [{"activity_id": aid, "key": "k", "order_waiting": 1, "order_head": "blocked"}]
    done = await release(db_pool, aid, key="k", by="ops-test")
    assert (done.workflow_id, done.run_status, done.next_workflow_id) == (
        runs[1].workflow_id, "failed", runs[3].workflow_id,
    )  # fmt: skip
    row = await db_pool.fetchrow(
        "SELECT outcome, released_by FROM flow_order_places WHERE workflow_id = $1",
        runs[1].workflow_id,
    )
    assert dict(row) == {"outcome": "released", "released_by": "ops-test"}
    t3 = await order_store.turn(db_pool, runs[3].workflow_id)
    assert t3 is not None and t3.place.turn


async def test_the_view_frees_a_line_on_exactly_the_statuses_the_worker_lists(db_pool):
    sql = await db_pool.fetchval("SELECT pg_get_viewdef('flow_order_open'::regclass)")
    for status in ("succeeded", "cancelled", "timed_out", "skipped", "failed", "running", "held"):
        assert (f"'{status}'" in sql) == (status in order_store.FREES_LINE), status


async def test_prune_keeps_open_lines_and_drops_old_places_closed_either_way(db_pool):
    """Retention: a place closed by ``done_at`` or by its run's row (a cancel, which
    leaves ``done_at`` unset) goes once it is older than the retention; a failed run's
    place and a recent one stay."""
    aid = str(uuid.uuid4())
    lines = OrderLines(db_pool)
    runs = [_run(aid, f"p{i}") for i in range(4)]
    await lines.assign([PlaceRequest(r, "k") for r in runs])
    old = "now() - interval '10 days'"
    for run, status in zip(runs[:3], ("cancelled", "failed", "cancelled"), strict=True):
        await db_pool.execute(
            "INSERT INTO activity_runs (run_id, activity_id, workflow_id, trigger_kind,"
            " status, finished_at) VALUES ($1::uuid, $2::uuid, $3, 'event', $4,"
            f" CASE WHEN $5 THEN {old} ELSE now() END)",
            run.run_id, aid, run.workflow_id, status, run is not runs[2],
        )  # fmt: skip
    await order_store.close(db_pool, runs[3].run_id, "succeeded")
    await db_pool.execute(
        f"UPDATE flow_order_places SET done_at = {old} WHERE workflow_id = $1",
        runs[3].workflow_id,
    )
    assert await lines.prune(retention_days=7) == 2
    left = await db_pool.fetch(
        "SELECT workflow_id FROM flow_order_places WHERE activity_id = $1::uuid", aid
    )
    assert {r["workflow_id"] for r in left} == {runs[1].workflow_id, runs[2].workflow_id}
