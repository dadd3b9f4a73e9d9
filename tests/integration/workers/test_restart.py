"""A worker stopped while a task handler is blocked; a new worker finishes the run.

Nothing is logged twice, no task that finished runs again, each task workflow is
started exactly once, and the interrupted task is retried to success.
"""

from __future__ import annotations

import asyncio

from temporalio.api.enums.v1 import EventType

from tests.support.runs import event_run, insert_activity, registry_with, start_run
from tests.support.wait import eventually
from workers.handlers import TaskContext


async def test_worker_restart_mid_run_runs_each_task_once(cfg, temporal, db_pool, worker):
    ran: list[tuple[str, str, int]] = []  # (worker, task_id, attempt)
    blocked = asyncio.Event()

    def handlers(name: str, block: bool):  # type: ignore[no-untyped-def]
        async def record(ctx: TaskContext) -> None:
            ran.append((name, ctx.task_id, ctx.attempt))

        async def slow(ctx: TaskContext) -> None:
            ran.append((name, ctx.task_id, ctx.attempt))
            if block:
                blocked.set()
                await asyncio.Event().wait()  # until the worker's shutdown cancels it

        return registry_with(record=record, slow=slow)

    activity_id = await insert_activity(
        db_pool,
        [
            {"type": "record", "count": 2},
            {"type": "slow", "config": {"heartbeat_timeout_seconds": 2,
                                         "retry_initial_seconds": 0.2}},
        ],
    )  # fmt: skip
    run = event_run(activity_id)
    quick_stop = cfg.model_copy(
        update={"process": cfg.process.model_copy(update={"shutdown_grace_seconds": 0.5})}
    )

    async def records_done() -> bool:
        n = await db_pool.fetchval(
            "SELECT count(*) FROM task_instances WHERE run_id = $1::uuid"
            " AND task_type = 'record' AND status = 'succeeded'",
            run.run_id,
        )
        return bool(blocked.is_set() and n == 2)

    async with worker(registry=handlers("w1", block=True), settings=quick_stop):
        handle = await start_run(temporal, run, cfg.temporal.task_queue)
        await eventually(records_done, 30, "the records to be done")
    # Worker 1 is gone with the slow task mid-handler.
    status = await db_pool.fetchval(
        "SELECT status FROM task_instances WHERE run_id = $1::uuid AND task_type = 'slow'",
        run.run_id,
    )
    assert status == "running"

    async with worker(registry=handlers("w2", block=False)):
        result = await asyncio.wait_for(handle.result(), 90)

    assert (result.status, result.tasks_total, result.tasks_succeeded) == ("succeeded", 3, 3)
    record_runs = [(w, t) for w, t, _ in ran if ":record:" in t]
    assert sorted(record_runs) == [("w1", f"task-{run.run_id}:record:0"),
                                   ("w1", f"task-{run.run_id}:record:1")]  # fmt: skip
    slow_runs = [(w, a) for w, t, a in ran if ":slow:" in t]
    assert slow_runs == [("w1", 1), ("w2", 2)]

    assert (
        await db_pool.fetchval(
            "SELECT count(*) FROM activity_runs WHERE activity_id = $1::uuid", activity_id
        )
        == 1
    )
    rows = await db_pool.fetch(
        "SELECT task_type, status, attempts FROM task_instances WHERE run_id = $1::uuid"
        " ORDER BY index",
        run.run_id,
    )
    assert [tuple(r) for r in rows] == [
        ("record", "succeeded", 1), ("record", "succeeded", 1), ("slow", "succeeded", 2),
    ]  # fmt: skip

    history = await handle.fetch_history()
    starts = [
        e for e in history.events
        if e.event_type == EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED
    ]  # fmt: skip
    assert len(starts) == 3  # each task workflow started exactly once, across both workers
    completed = [
        e for e in history.events
        if e.event_type == EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED
    ]  # fmt: skip
    assert len(completed) == 3
