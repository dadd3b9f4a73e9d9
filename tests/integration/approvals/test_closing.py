"""No approval row stays open after its workflow has closed, on any path.

A decision, an auto-reject and an expiry close it in the other tests. Here: the run
is cancelled (the workflow closes the row as ``cancelled`` before it ends), the run
is terminated (no workflow code runs: the approvals part's sweep closes it as
``terminated``), and the wait itself fails (``failed``, and the task fails with the
error). Before the fix each of them left the row ``waiting`` for good.
"""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
import pytest
from temporalio import activity
from temporalio.client import WorkflowExecutionStatus, WorkflowFailureError
from temporalio.exceptions import ApplicationError

from schemas.approval_io import ApprovalNoticeInput
from tests.support import wait
from tests.support.runs import worker_factory
from workers.approvals import part as approvals_part
from workers.approvals.activities import ApprovalActivities
from workers.parts import PartDeps, WorkerPart, core_part

from .conftest import approval_task, start_approval_run, state, wait_state


async def _row(pool: asyncpg.Pool, task_id: str) -> dict[str, Any]:
    row = await pool.fetchrow("SELECT * FROM approvals WHERE task_id = $1", task_id)
    assert row is not None
    last = await pool.fetchrow(
        "SELECT kind, reason FROM approval_events WHERE task_id = $1 ORDER BY seq DESC LIMIT 1",
        task_id,
    )
    return {**dict(row), "last_kind": last["kind"], "last_reason": last["reason"]}


async def test_a_cancelled_run_closes_its_approval(cfg, temporal, db_pool, approval_worker):
    async with approval_worker():
        run, task, _ = await start_approval_run(
            temporal, db_pool, cfg.temporal.task_queue, approval_task(sla_seconds=600)
        )
        await wait_state(task, lambda s: s.status == "waiting")
        await run.cancel()
        with pytest.raises(WorkflowFailureError):
            await asyncio.wait_for(run.result(), 60)
        assert (await task.describe()).status == WorkflowExecutionStatus.CANCELED
    row = await _row(db_pool, task.id)
    assert (row["status"], row["last_kind"], row["deadline"]) == ("cancelled", "cancelled", None)
    assert row["closed_at"] is not None


async def test_a_terminated_run_has_its_approval_closed_by_the_sweep(
    cfg, temporal, db_pool, approval_worker, monkeypatch
):
    monkeypatch.setattr(approvals_part, "GAUGE_REFRESH_SECONDS", 0.5)  # sweep often
    async with approval_worker():
        run, task, _ = await start_approval_run(
            temporal, db_pool, cfg.temporal.task_queue, approval_task(sla_seconds=600)
        )
        await wait_state(task, lambda s: s.status == "waiting")
        await run.terminate("test: an operator terminates the run")
        # The parent's close policy terminates the task's workflow: no code of it runs.

        async def closed() -> bool:
            row = await _row(db_pool, task.id)
            return row["closed_at"] is not None

        await wait.eventually(closed, 30, "the sweep to close the terminated approval")
    assert (await task.describe()).status == WorkflowExecutionStatus.TERMINATED
    row = await _row(db_pool, task.id)
    assert (row["status"], row["last_kind"], row["deadline"]) == ("terminated", "terminated", None)
    assert "TERMINATED" in row["last_reason"]


def _failing_notices(deps: PartDeps) -> WorkerPart:
    """The approvals part, with notices that fail for good (a wait that fails)."""
    real = approvals_part.approval_part(deps)
    acts = ApprovalActivities(deps.pool, deps.resources)

    @activity.defn(name="approval_notice")
    async def notice(inp: ApprovalNoticeInput) -> None:
        if inp.kind == "approval.reminder":
            raise ApplicationError("the notice service refuses it", non_retryable=True)
        await acts.notice(inp)

    return WorkerPart(real.name, activities=[notice, acts.record])


async def test_a_wait_that_fails_closes_its_approval_as_failed(cfg, temporal, db_pool, topics):
    config = approval_task(sla_seconds=600, remind_every_seconds=0.2)
    factory = worker_factory(cfg, temporal, db_pool)
    async with factory(parts=(core_part, _failing_notices), emit_topic=topics.out):
        run, task, _ = await start_approval_run(temporal, db_pool, cfg.temporal.task_queue, config)
        # The first reminder fails for good: the task fails at once, its row closed first.
        outcome = await asyncio.wait_for(run.result(), 60)
        final = await state(task)
    assert (outcome.status, outcome.tasks_failed) == ("failed", 1)
    assert final.status == "failed" and final.audit[-1].kind == "failed"
    row = await _row(db_pool, task.id)
    assert (row["status"], row["last_kind"], row["deadline"]) == ("failed", "failed", None)
    assert "the notice service refuses it" in row["last_reason"]
    assert row["closed_at"] is not None
