"""No decision: the SLA passes, the task escalates, then auto-rejects; the run fails
and the task after the approval never starts."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from tests.support.metrics import metric_value

from .conftest import approval_task, at, events, notices, start_approval_run, state, wait_state

SLA, ESCALATION_SLA = 2.0, 2.0


async def test_no_decision_escalates_then_auto_rejects(
    cfg, temporal, db_pool, topics, approval_worker
):
    escalations_before = metric_value("pipeline_sla_escalations_total", missing_ok=True)
    auto_before = metric_value(
        "pipeline_approval_decisions_total", missing_ok=True, outcome="auto_reject"
    )
    config = approval_task(
        sla_seconds=SLA, escalate_to=["carol"], escalation_sla_seconds=ESCALATION_SLA
    )
    async with approval_worker():
        run, task, inp = await start_approval_run(
            temporal, db_pool, cfg.temporal.task_queue, config
        )
        escalated = await wait_state(task, lambda s: s.status == "escalated")
        outcome = await asyncio.wait_for(run.result(), 60)
        final = await state(task)

    requested = at(final.audit[0].at)
    sla_end = requested + timedelta(seconds=SLA)
    assert escalated.deadline == (sla_end + timedelta(seconds=ESCALATION_SLA)).isoformat()
    assert [e.kind for e in final.audit] == ["requested", "escalated", "auto_rejected"]
    assert at(final.audit[1].at) >= sla_end
    assert at(final.audit[2].at) >= sla_end + timedelta(seconds=ESCALATION_SLA)
    assert (final.status, final.escalations) == ("auto_rejected", 1)

    # The run fails with the approval's reason; the emit behind it is skipped, never started.
    assert (outcome.status, outcome.tasks_failed, outcome.tasks_skipped) == ("failed", 1, 1)
    row = await db_pool.fetchrow(
        "SELECT status, last_error FROM task_instances WHERE id = $1", task.id
    )
    assert row["status"] == "failed"
    assert row["last_error"] == (
        "ApprovalRejected: approval auto_rejected: no decision within 4 s (SLA and escalation SLA)"
    )
    n = await db_pool.fetchval(
        "SELECT count(*) FROM task_instances WHERE run_id = $1::uuid", inp.run_id
    )
    assert n == 1
    # The escalation event went to the escalation contact, keyed by the task id.
    (notice,) = await notices(cfg, db_pool, topics.out, "approval.escalated")
    assert (notice["to"], notice["task_id"], notice["status"]) == (["carol"], task.id, "escalated")
    assert [r["kind"] for r in await events(db_pool, task.id)] == [e.kind for e in final.audit]
    assert (
        await db_pool.fetchval("SELECT status FROM approvals WHERE task_id = $1", task.id)
        == "auto_rejected"
    )
    assert metric_value("pipeline_sla_escalations_total") == escalations_before + 1
    auto = metric_value("pipeline_approval_decisions_total", outcome="auto_reject")
    assert auto == auto_before + 1
