"""20 tasks compete for 3 permits: never more than 3 inside, all finish; the
histories that waited replay deterministically."""

from __future__ import annotations

import asyncio

from prometheus_client import REGISTRY
from temporalio.api.enums.v1 import EventType
from temporalio.worker import Replayer

from tests.support.runs import event_run, insert_activity, registry_with, start_run
from workers.handlers import TaskContext
from workers.permits.workflow import PermitSlotWorkflow
from workers.task_workflow import TaskInstanceWorkflow

from .conftest import declare, peak
from .handlers import visit


async def test_capacity_holds_under_contention_and_replays(
    cfg, temporal, visits_table, permit_worker
):
    pool = visits_table
    resource = await declare(pool, capacity=3)

    async def handler(ctx: TaskContext) -> None:
        await visit(pool, ctx)

    activity_id = await insert_activity(
        pool,
        [{"type": "visit", "count": 20, "permit": {"resource": resource},
          "config": {"hold_seconds": 0.3}}],
    )  # fmt: skip
    run = event_run(activity_id)
    conflicts = "pipeline_permit_acquire_conflicts_total"
    before = REGISTRY.get_sample_value(conflicts, {"resource": resource}) or 0.0
    async with permit_worker(registry_with(visit=handler)):
        result = await asyncio.wait_for(
            (await start_run(temporal, run, cfg.temporal.task_queue)).result(), 120
        )

    assert (result.status, result.tasks_total, result.tasks_succeeded) == ("succeeded", 20, 20)
    rows = await pool.fetch("SELECT task_id, slot, token FROM visits")
    assert len({r["task_id"] for r in rows}) == 20
    assert {r["slot"] for r in rows} <= {"0", "1", "2"}
    assert await peak(pool) <= 3
    # One fencing token per acquire: the slots' counters add up to the 20 acquires,
    # and no (slot, token) was handed out twice.
    assert await pool.fetchval("SELECT sum(token) FROM permit_slots WHERE resource = $1",
                               resource) == 20  # fmt: skip
    assert len({(r["slot"], r["token"]) for r in rows}) == 20
    # Contention really happened (busy slots met), so the test exercised waiting.
    after = REGISTRY.get_sample_value(conflicts, {"resource": resource})
    assert after is not None and after > before
    assert REGISTRY.get_sample_value("pipeline_permit_wait_seconds_count") is not None

    # Determinism: replay every task history, including ones that met busy slots
    # and slept (failed child starts, timers, markers), against today's code.
    waited = 0
    replayer = Replayer(workflows=[TaskInstanceWorkflow, PermitSlotWorkflow])
    for task_id in sorted({r["task_id"] for r in rows}):
        history = await temporal.get_workflow_handle(task_id).fetch_history()
        kinds = {e.event_type for e in history.events}
        busy = EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_FAILED in kinds
        waited += busy and EventType.EVENT_TYPE_TIMER_FIRED in kinds
        replay = await replayer.replay_workflow(history, raise_on_replay_failure=False)
        assert replay.replay_failure is None, f"{task_id}: {replay.replay_failure!r}"
    assert waited > 0
