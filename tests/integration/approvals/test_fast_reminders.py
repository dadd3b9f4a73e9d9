"""Reminders faster than the worker can keep up with, through many continue-as-new points.

Issue 21, section 5: with reminders every 0.05 s, the task failed at its first
continue-as-new point (``CancelledError: Activity cancelled``: the reminder task was
cancelled while it wrote its audit entry), the run failed, and the approvals row
stayed ``waiting``. On the PRIVATE dev server of these tests (conftest: the suggestion
limits lowered through ``StackSettings.temporal_dynamic_config``), the history reaches
the suggestion point every few reminders, so one test crosses it many times in seconds.
"""

from __future__ import annotations

import asyncio

import orjson
from temporalio.client import WorkflowExecutionStatus, WorkflowHandle

from workers.approvals.machine import CARRIED_REMINDERS

from .conftest import approval_task, decide, events, replays, start_approval_run, state

CROSSINGS = 5  # continue-as-new points to pass before deciding


async def _continued(run: WorkflowHandle, task: WorkflowHandle, times: int) -> None:
    """Until the task has continued as new ``times`` times, or the run has closed."""
    async with asyncio.timeout(120):
        while True:
            if (await run.describe()).status != WorkflowExecutionStatus.RUNNING:
                return
            try:
                if (await state(task)).continued_runs >= times:
                    return
            except Exception:  # the task's workflow not started yet
                pass
            await asyncio.sleep(0.2)


async def test_reminders_every_50ms_continue_as_new_and_keep_waiting(
    cfg, temporal, db_pool, approval_worker
):
    config = approval_task(sla_seconds=3600, remind_every_seconds=0.05)
    async with approval_worker():
        run, task, _ = await start_approval_run(
            temporal, db_pool, cfg.temporal.task_queue, config, then=[{"type": "noop"}]
        )
        await _continued(run, task, CROSSINGS)
        assert (await run.describe()).status == WorkflowExecutionStatus.RUNNING, await run.result()
        waiting = await state(task)
        row = await db_pool.fetchrow("SELECT * FROM approvals WHERE task_id = $1", task.id)
        assert (waiting.status, row["status"], row["closed_at"]) == ("waiting", "waiting", None)
        await decide(task, "alice", "approve")
        outcome = await asyncio.wait_for(run.result(), 60)
        final = await state(task)
    await replays(task)

    assert (outcome.status, outcome.tasks_succeeded) == ("succeeded", 2)
    assert final.continued_runs >= CROSSINGS
    # State kept across every run: the whole trail in PostgreSQL, numbered without a gap.
    written = await events(db_pool, task.id)
    assert [r["seq"] for r in written] == list(range(len(written)))
    kinds = [r["kind"] for r in written]
    assert kinds[0] == "requested" and kinds[-1] == "decision"
    assert set(kinds[1:-1]) == {"reminder"} and final.reminders_sent == len(kinds) - 2
    # The queryable trail is that trail, less the reminders older than the last carried.
    assert [(e.seq, e.kind) for e in final.audit] == [
        (r["seq"], r["kind"]) for r in written if r["seq"] in {e.seq for e in final.audit}
    ]
    assert final.audit[0].kind == "requested" and final.audit[-1].kind == "decision"
    # What a continued run carries is bounded: the last run started with at most
    # CARRIED_REMINDERS reminders in its input, however many were sent.
    assert final.reminders_sent > 2 * CARRIED_REMINDERS
    started = (await task.fetch_history()).events[0].workflow_execution_started_event_attributes
    carried = orjson.loads(started.input.payloads[0].data)["continued"]["approval"]["audit"]
    assert 0 < sum(e["kind"] == "reminder" for e in carried) <= CARRIED_REMINDERS
    row = await db_pool.fetchrow("SELECT * FROM approvals WHERE task_id = $1", task.id)
    assert row["status"] == "approved" and row["closed_at"] is not None
