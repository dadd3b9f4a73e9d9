"""flow.cancel_on's records are pruned with the ledger's retention (router/flow/store.py
``FlowStore.prune``, called hourly by the router): a cancelling event's first
processing time goes past the retention, as the ledger's entry does; a run's match
keys and cancel request go past it too once the run is not open (finished, or never
written), and stay while it is (it can still be cancelled and name its canceller).
"""

from __future__ import annotations

import uuid

import asyncpg

from router.flow.store import FlowStore

DAY = 86400


async def _run(pool: asyncpg.Pool, aid: uuid.UUID, wid: str, status: str) -> None:
    await pool.execute(
        "INSERT INTO activity_runs (run_id, activity_id, workflow_id, trigger_kind, status)"
        " VALUES ($1, $2, $3, 'event', $4)",
        uuid.uuid4(),
        aid,
        wid,
        status,
    )


async def _records(pool: asyncpg.Pool, aid: uuid.UUID, wid: str, age_days: float) -> None:
    age = age_days * DAY
    await pool.execute(
        "INSERT INTO flow_cancel_keys (activity_id, key, workflow_id, decided_at)"
        " VALUES ($1, 'k', $2, now() - make_interval(secs => $3))",
        aid,
        wid,
        age,
    )
    await pool.execute(
        "INSERT INTO flow_cancel_requests (workflow_id, activity_id, ended_by, requested_at)"
        " VALUES ($1, $2, 'cancel_on:e', now() - make_interval(secs => $3))",
        wid,
        aid,
        age,
    )


async def _left(pool: asyncpg.Pool, aid: uuid.UUID) -> dict[str, list[str]]:
    out = {}
    for table, col in (
        ("flow_cancel_keys", "workflow_id"),
        ("flow_cancel_requests", "workflow_id"),
        ("flow_cancel_events", "event_id"),
    ):
        rows = await pool.fetch(f"SELECT {col} FROM {table} WHERE activity_id = $1 ORDER BY 1", aid)
        out[table] = [r[0] for r in rows]
    return out


async def test_cancel_records_past_the_retention_go_unless_their_run_is_open(db_pool):
    aid = uuid.uuid4()
    tag = uuid.uuid4().hex[:8]
    finished, open_, held, unwritten, recent = (
        f"{n}-{tag}" for n in ("finished", "open", "held", "unwritten", "recent")
    )
    await _run(db_pool, aid, finished, "cancelled")
    await _run(db_pool, aid, open_, "running")
    await _run(db_pool, aid, held, "held")
    for wid in (finished, open_, held, unwritten):
        await _records(db_pool, aid, wid, 10)
    await _records(db_pool, aid, recent, 1)
    for event_id, age in ((f"old-{tag}", 10), (f"new-{tag}", 1)):
        await db_pool.execute(
            "INSERT INTO flow_cancel_events (event_id, activity_id, key, first_at)"
            " VALUES ($1, $2, 'k', now() - make_interval(secs => $3))",
            event_id,
            aid,
            age * DAY,
        )
    store = FlowStore(db_pool)
    before = await _left(db_pool, aid)
    assert await store.prune(0) == 0  # 0: keep forever
    assert await _left(db_pool, aid) == before
    assert await store.prune(5) >= 5  # 2 keys, 2 requests, 1 event of this test at least
    kept = sorted([held, open_, recent])
    assert await _left(db_pool, aid) == {
        "flow_cancel_keys": kept,
        "flow_cancel_requests": kept,
        "flow_cancel_events": [f"new-{tag}"],
    }
    await db_pool.execute("DELETE FROM activity_runs WHERE activity_id = $1", aid)
    for table in ("flow_cancel_keys", "flow_cancel_requests", "flow_cancel_events"):
        await db_pool.execute(f"DELETE FROM {table} WHERE activity_id = $1", aid)
