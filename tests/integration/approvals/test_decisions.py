"""Who may decide, and when: refusals come from the update validator and write no
history; a decision just before a reminder is due means no reminder after it."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError

from schemas.approval_io import ApprovalResubmission
from workers.task_workflow import TaskInstanceWorkflow

from .conftest import (
    approval_task,
    at,
    decide,
    notices,
    quiet,
    replays,
    sleep_until,
    start_approval_run,
    state,
    wait_state,
)

_UPDATE_EVENTS = {
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED,
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED,
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ADMITTED,
}


async def refused(task, by: str, decision: str, reason: str | None = None) -> ApplicationError:
    with pytest.raises(WorkflowUpdateFailedError) as err:
        await decide(task, by, decision, reason)
    cause = err.value.cause
    assert isinstance(cause, ApplicationError)
    return cause


async def test_only_listed_approvers_decide_and_refusals_write_no_history(
    cfg, temporal, db_pool, approval_worker
):
    config = approval_task(approvers=["alice", "bob"], sla_seconds=60, escalate_to="carol")
    async with approval_worker():
        run, task, _ = await start_approval_run(temporal, db_pool, cfg.temporal.task_queue, config)
        await wait_state(task, lambda s: s.status == "waiting")
        await quiet(task)
        before = (await task.fetch_history()).events

        mallory = await refused(task, "mallory", "approve")
        assert mallory.type == "ApprovalNotAllowed"
        assert "'mallory' may not decide" in mallory.message
        carol = await refused(task, "carol", "approve")  # escalation contact, before the SLA
        assert carol.type == "ApprovalNotAllowed" and "carol after the SLA" in carol.message
        no_reason = await refused(task, "bob", "reject")
        assert (no_reason.type, no_reason.message) == (
            "ApprovalInvalid", "a reason is required to reject"
        )  # fmt: skip
        assert (await refused(task, "bob", "maybe")).type == "ApprovalInvalid"

        after = (await task.fetch_history()).events
        assert len(after) == len(before), "a refused update must not write history"
        assert not {e.event_type for e in after} & _UPDATE_EVENTS
        s = await state(task)
        assert (s.status, [e.kind for e in s.audit]) == ("waiting", ["requested"])

        # A listed approver asks for changes: now a decision is refused (not open) until
        # a resubmission; then bob rejects, and the task is closed for good.
        await decide(task, "bob", "request_changes", "attach the invoice")
        busy = await refused(task, "alice", "approve")
        assert busy.type == "ApprovalNotOpen" and "waits for a resubmission" in busy.message
        await task.execute_update(TaskInstanceWorkflow.resubmit, _resubmission())
        result = await decide(task, "bob", "reject", "over budget")
        assert result.status == "rejected"
        outcome = await asyncio.wait_for(run.result(), 60)
        closed = await state(task)
    await replays(task, run)

    assert outcome.status == "failed"
    assert [e.kind for e in closed.audit] == [
        "requested", "decision", "resubmitted", "decision"
    ]  # fmt: skip
    assert (closed.round, closed.payload["amount"], closed.payload["invoice"]) == (2, 1300, "i-9")
    assert closed.payload["trigger"]["run_id"] == outcome.run_id  # reserved keys kept
    row = await db_pool.fetchrow("SELECT status, last_error FROM task_instances WHERE id = $1",
                                 task.id)  # fmt: skip
    assert tuple(row) == ("failed", "ApprovalRejected: approval rejected by bob: over budget")
    # A decision on the closed task is refused too (the workflow has completed).
    with pytest.raises(Exception, match=r"(?i)completed|closed"):
        await decide(task, "alice", "approve")


def _resubmission() -> ApprovalResubmission:
    return ApprovalResubmission("submitter", {"amount": 1300, "invoice": "i-9"}, "added")


async def test_a_decision_just_before_a_reminder_stops_reminders(
    cfg, temporal, db_pool, topics, approval_worker
):
    remind = 2.0
    config = approval_task(sla_seconds=60, remind_every_seconds=remind)
    async with approval_worker():
        run, task, _ = await start_approval_run(temporal, db_pool, cfg.temporal.task_queue, config)
        s = await wait_state(task, lambda s: s.status == "waiting")
        requested = at(s.audit[0].at)
        second_due = requested + timedelta(seconds=2 * remind)
        # 0.5 s before the second reminder is due (the first went out at +2 s).
        await sleep_until(second_due - timedelta(seconds=0.5))
        await decide(task, "alice", "approve")
        # Stay past two more due times: nothing may follow the decision.
        await sleep_until(second_due + timedelta(seconds=remind + 0.5))
        assert (await asyncio.wait_for(run.result(), 60)).status == "succeeded"
        final = await state(task)

    decided = at(final.audit[-1].at)
    assert decided < second_due, "the test needs the decision before the second reminder is due"
    reminders = [e for e in final.audit if e.kind == "reminder"]
    assert len(reminders) == final.reminders_sent == 1
    sent = await notices(cfg, db_pool, topics.out, "approval.reminder")
    assert [at(n["due"]) for n in sent] == [requested + timedelta(seconds=remind)]
    assert all(at(n["due"]) < decided for n in sent)
