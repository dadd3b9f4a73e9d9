"""Approval timers in workflow time: reminders, the SLA, escalation, auto-rejection.

A two-day SLA, a one-day escalation SLA and reminders every ten hours, on the
time-skipping test server: what takes three days of wall time passes here in a
second or two (the real-stack equivalents, tests/integration/approvals, use SLAs
of a few seconds and wait them out).
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any

from temporalio.client import WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from schemas.approval_io import ApprovalDecision, ApprovalState
from schemas.ids import task_workflow_id
from schemas.workflow_io import TaskInstanceInput, TaskInstanceResult, TaskSpec
from tests.unit.timers.conftest import WorkerFactory
from tests.unit.timers.fakes import Fakes
from workers.task_workflow import TaskInstanceWorkflow

HOUR = 3600.0
SLA, ESCALATION_SLA, EVERY = 48 * HOUR, 24 * HOUR, 10 * HOUR


async def _start(env: WorkflowEnvironment, queue: str, **config: Any) -> WorkflowHandle[Any, Any]:
    run_id = str(uuid.uuid4())
    task_id = task_workflow_id(run_id, "approval", 0)
    spec = TaskSpec("approval", 0, {"amount": 1200}, {"approvers": ["alice"], **config})
    inp = TaskInstanceInput(task_id, run_id, str(uuid.uuid4()), spec, claim_running=True)
    return await env.client.start_workflow(
        TaskInstanceWorkflow.run, inp, id=task_id, task_queue=queue
    )


def _offsets(state: ApprovalState) -> list[tuple[str, float]]:
    """(kind, hours after the request, to the minute) of each audit entry (a timer
    fires once the workflow task before it is done: milliseconds late)."""
    start = datetime.fromisoformat(state.audit[0].at)
    return [
        (e.kind, round((datetime.fromisoformat(e.at) - start).total_seconds() / 60) / 60)
        for e in state.audit
    ]


async def test_reminders_then_escalation_then_auto_reject(
    time_env: WorkflowEnvironment, fake_worker: WorkerFactory
) -> None:
    fakes = Fakes()
    async with fake_worker(fakes) as queue:
        handle = await _start(
            time_env,
            queue,
            sla_seconds=SLA,
            escalate_to=["carol"],
            escalation_sla_seconds=ESCALATION_SLA,
            remind_every_seconds=EVERY,
        )
        result: TaskInstanceResult = await handle.result()
        state = await handle.query(TaskInstanceWorkflow.approval)
        assert state is not None

    # Reminders every 10 h through both phases; escalation at 48 h, auto-reject at 72 h.
    assert _offsets(state) == [
        ("requested", 0),
        *[("reminder", h) for h in (10, 20, 30, 40)],
        ("escalated", 48),
        *[("reminder", h) for h in (50, 60, 70)],
        ("auto_rejected", 72),
    ]
    assert (state.status, state.escalations, state.reminders_sent) == ("auto_rejected", 1, 7)
    assert fakes.notices == [
        "approval.requested",
        *["approval.reminder"] * 4,
        "approval.escalated",
        *["approval.reminder"] * 3,
    ]
    reason = "approval auto_rejected: no decision within 259200 s (SLA and escalation SLA)"
    assert (result.status, result.error) == ("failed", f"ApprovalRejected: {reason}")
    assert fakes.states == ["running", "failed"]


async def test_a_decision_stops_the_reminders_and_the_sla(
    time_env: WorkflowEnvironment, fake_worker: WorkerFactory
) -> None:
    fakes = Fakes()
    async with fake_worker(fakes) as queue:
        handle = await _start(time_env, queue, sla_seconds=SLA, remind_every_seconds=EVERY)
        await time_env.sleep(timedelta(hours=25))  # two reminders are due meanwhile
        await handle.execute_update(
            TaskInstanceWorkflow.decide, ApprovalDecision("alice", "approve")
        )
        result: TaskInstanceResult = await handle.result()
        state = await handle.query(TaskInstanceWorkflow.approval)
        assert state is not None

    kinds = [kind for kind, _ in _offsets(state)]
    assert kinds == ["requested", "reminder", "reminder", "decision"]
    assert _offsets(state)[-1][1] == 25
    assert (state.status, result.status) == ("approved", "succeeded")
    assert fakes.states == ["running", "succeeded"]
