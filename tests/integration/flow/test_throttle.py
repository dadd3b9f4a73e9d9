"""throttle through the live router on real Kafka, Temporal and PostgreSQL.

40 events in one burst, limit 5 per 2 s (burst 1): GCRA gives start i at t0 + i * 0.4 s.
Each run is started at once with ``start_delay`` (id reserved, REJECT_DUPLICATE);
Temporal schedules its first task when the delay ends. No worker runs: the first
WorkflowTaskScheduled event in each history is when Temporal let the run go.
"""

from __future__ import annotations

import uuid

import pytest

from router.settings import RouterSettings
from tests.support import db, metrics
from tests.support.routing import route_until_committed
from tests.support.wait import eventually

from .gate_support import first_task_scheduled, produce, wids

N, LIMIT, PERIOD = 40, 5, 2.0
T = PERIOD / LIMIT
# Temporal lets a delayed run go by a timer: never before the start time the router
# computed, and on the loaded shared dev server within this much after it (a run that
# was not delayed at all would show up seconds *early*).
LATE_TOLERANCE = 5.0


async def test_a_burst_is_spread_as_gcra_says_and_a_redelivery_takes_no_slot(
    cfg, temporal, db_pool
):
    etype = f"th.{uuid.uuid4().hex[:8]}"
    aid = await db.seed_activity(
        db_pool, etype, flow={"throttle": {"limit": LIMIT, "period": f"{PERIOD}s"}}
    )
    evs = await produce(cfg, etype, N)
    delayed = metrics.metric_value(
        "pipeline_flow_runs_delayed_total", missing_ok=True, activity=aid
    )
    tag = uuid.uuid4().hex[:8]
    first = await route_until_committed(
        cfg, RouterSettings(group=f"a-{tag}", commit_interval_ms=100), temporal, db_pool
    )
    assert first.routing.stats.started == N and first.routing.stats.skipped == 0

    # The decisions: one slot each, exactly T apart.
    rows = await db_pool.fetch(
        "SELECT workflow_id, start_at FROM flow_decisions WHERE activity_id = $1::uuid"
        " ORDER BY start_at",
        aid,
    )
    assert {r["workflow_id"] for r in rows} == set(wids(aid, evs))
    t0 = rows[0]["start_at"]
    offsets = [(r["start_at"] - t0).total_seconds() for r in rows]
    assert offsets == pytest.approx([i * T for i in range(N)], abs=1e-3)
    assert metrics.metric_value("pipeline_flow_runs_delayed_total", activity=aid) - delayed >= N - 1

    # Temporal kept them: every run's first task was scheduled at its slot, none dropped.
    scheduled: dict[str, object] = {}

    async def all_scheduled() -> bool:
        for r in rows:
            if r["workflow_id"] not in scheduled:
                at = await first_task_scheduled(temporal, r["workflow_id"])
                if at is not None:
                    scheduled[r["workflow_id"]] = at
        return len(scheduled) == N

    await eventually(all_scheduled, N * T + 30, "every delayed run to be scheduled")
    late = {
        r["workflow_id"]: (scheduled[r["workflow_id"]] - r["start_at"]).total_seconds()
        for r in rows
    }
    assert all(-0.05 <= d <= LATE_TOLERANCE for d in late.values()), late

    # Redelivery: a new group reads the same 40 again. Through the ledger, and then
    # without it (Temporal answers already-started): no slot is taken either way.
    tat = await db_pool.fetchval("SELECT tat FROM flow_gcra WHERE activity_id = $1::uuid", aid)
    again = await route_until_committed(
        cfg, RouterSettings(group=f"b-{tag}", commit_interval_ms=100), temporal, db_pool
    )
    assert again.routing.stats.ledger_duplicates == N and again.routing.stats.started == 0
    no_ledger = await route_until_committed(
        cfg,
        RouterSettings(group=f"c-{tag}", commit_interval_ms=100, ledger=False),
        temporal,
        db_pool,
    )
    assert no_ledger.routing.stats.temporal_duplicates == N
    assert no_ledger.routing.stats.started == 0
    after = await db_pool.fetchrow(
        "SELECT tat, taken FROM flow_gcra WHERE activity_id = $1::uuid", aid
    )
    assert (after["tat"], after["taken"]) == (tat, N)
    assert (
        await db_pool.fetchval(
            "SELECT count(*) FROM flow_decisions WHERE activity_id = $1::uuid", aid
        )
        == N
    )
