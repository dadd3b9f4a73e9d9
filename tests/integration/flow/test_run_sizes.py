"""A run's plan carries its event once per task (issue 34, item 5, ordinary runs): the
definitions check (``definitions.files.run_size_problem``, for ``activities apply``)
accepts exactly the shapes that the real stack runs, and refuses the ones whose run
would stay ``running`` for ever (the worker fails its workflow task every 10 s with
``PayloadsTooLarge``, TMPRL1103)."""

from __future__ import annotations

import os
import uuid

from temporalio.api.enums.v1 import EventType, WorkflowTaskFailedCause
from temporalio.client import WorkflowExecutionStatus

from definitions.files import run_size_problem
from schemas.definitions import ActivityDef
from tests.support.runs import event_run, insert_activity, start_run, worker_factory
from tests.support.wait import eventually


def _definition(tasks: int) -> ActivityDef:
    return ActivityDef.model_validate(
        {
            "id": str(uuid.uuid4()),
            "name": "sized",
            "trigger": {"type": "event", "event_type": "t"},
            "tasks": [{"type": "noop"}] * tasks,
        }
    )


async def _run(cfg, temporal, db_pool, tasks: int, pad: int):  # type: ignore[no-untyped-def]
    aid = await insert_activity(db_pool, [{"type": "noop"}] * tasks)
    run = event_run(aid, data={"pad": os.urandom(pad // 2).hex()})
    return run, await start_run(temporal, run, cfg.temporal.task_queue)


async def test_two_tasks_carry_a_1_mb_event_and_three_cannot_carry_700_kb(cfg, temporal, db_pool):
    # what the check says, for INGEST_MAX_EVENT_BYTES of these sizes
    assert run_size_problem(_definition(2), 1_000_500) is None
    problem = run_size_problem(_definition(3), 700_500)
    assert problem is not None and problem.startswith("3 tasks each carry the event")
    assert "use at most 2 tasks" in problem
    worker = worker_factory(cfg, temporal, db_pool)
    async with worker():
        _, ok_handle = await _run(cfg, temporal, db_pool, 2, 1_000_000)
        stuck, stuck_handle = await _run(cfg, temporal, db_pool, 3, 700_000)
        try:
            assert (await ok_handle.result()).status == "succeeded"

            async def refused() -> bool:
                async for e in stuck_handle.fetch_history_events():
                    if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED:
                        cause = e.workflow_task_failed_event_attributes.cause
                        return bool(
                            cause
                            == WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_PAYLOADS_TOO_LARGE
                        )
                return False

            await eventually(refused, 30, "the 3-task run's plan to be refused as too large")
            assert (await stuck_handle.describe()).status == WorkflowExecutionStatus.RUNNING
            row = await db_pool.fetchval(
                "SELECT status FROM activity_runs WHERE workflow_id = $1", stuck.workflow_id
            )
            assert row in (None, "running")  # never finished: what the check prevents
        finally:
            if (await stuck_handle.describe()).status == WorkflowExecutionStatus.RUNNING:
                await stuck_handle.terminate("test cleanup: a run that never ends")
