"""The pause-and-fix loop (workers/fixes.py) continues as new too.

A task that fails on bad data pauses; an operator's fixes fail again and again, so
the loop grows its history until the server (this package's private dev server,
``suggestContinueAsNew`` lowered) suggests continue-as-new. The task continues as
new before a retry, carrying its fixes and the patched payload, and still finishes
once: one task_instances row, every fix in the ``fix_state`` query and in
``task_fixes``, and the run's one child start.
"""

from __future__ import annotations

import asyncio

from temporalio.api.enums.v1 import EventType

from schemas.ids import task_workflow_id
from schemas.workflow_io import FixRequest, FixResult, FixState
from tests.integration.ops.handlers import charge
from tests.support.runs import event_run, insert_activity, start_run, worker_factory
from workers.handlers import load_registry

from .conftest import replays

BAD_FIXES = 5


async def wait_paused(task, fixes: int) -> FixState:  # type: ignore[no-untyped-def]
    async with asyncio.timeout(60):
        while True:
            try:
                s = await task.query("fix_state", result_type=FixState)
                if s.status == "pending_fix" and len(s.fixes) == fixes:
                    return s
            except Exception:  # not started, or between two runs of the chain
                pass
            await asyncio.sleep(0.1)


async def test_a_fix_loop_continues_as_new_and_finishes_once(cfg, temporal, db_pool):
    registry = load_registry(use_entry_points=False)
    registry.add(charge, "charge")
    task_def = {"type": "charge", "payload": {"amount": "ten"}, "config": {"max_attempts": 1},
                "on_failure": "pause"}  # fmt: skip
    run = event_run(await insert_activity(db_pool, [task_def]))
    task_id = task_workflow_id(run.run_id, "charge", 0)
    async with worker_factory(cfg, temporal, db_pool)(registry=registry):
        handle = await start_run(temporal, run, cfg.temporal.task_queue)
        task = temporal.get_workflow_handle(task_id)
        await wait_paused(task, 0)
        first_run = (await task.describe()).run_id
        for i in range(1, BAD_FIXES + 1):
            req = FixRequest("op", {"amount": f"still-bad-{i}"}, f"try {i}")
            await task.execute_update("fix", req, result_type=FixResult)
            await wait_paused(task, i)
        await task.execute_update("fix", FixRequest("op", {"amount": 12}), result_type=FixResult)
        result = await asyncio.wait_for(handle.result(), 60)
        final = await task.query("fix_state", result_type=FixState)
        last_run = (await task.describe()).run_id
        await replays(task)

    assert result.status == "succeeded" and last_run != first_run
    assert [f.seq for f in final.fixes] == list(range(1, BAD_FIXES + 2))
    assert [f.patch for f in final.fixes][-2:] == [{"amount": f"still-bad-{BAD_FIXES}"},
                                                   {"amount": 12}]  # fmt: skip
    assert (final.status, final.payload["amount"]) == ("succeeded", 12)
    rows = await db_pool.fetch("SELECT id, status FROM task_instances WHERE run_id = $1::uuid",
                               run.run_id)  # fmt: skip
    assert [tuple(r) for r in rows] == [(task_id, "succeeded")]
    audited = await db_pool.fetchval("SELECT count(*) FROM task_fixes WHERE task_id = $1", task_id)
    assert audited == BAD_FIXES + 1
    starts = [
        e for e in (await handle.fetch_history()).events
        if e.event_type == EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED
    ]  # fmt: skip
    assert len(starts) == 1
