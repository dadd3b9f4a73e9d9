"""Approve in time: the run goes on, and the reminders sent match the time waited."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import orjson

from tests.support import wait
from tests.support.metrics import metric_value

from .conftest import (
    approval_task,
    at,
    decide,
    events,
    notices,
    sleep_until,
    start_approval_run,
    state,
    wait_state,
)

# Reminders every 2 s; the decision lands half-way between two (at +5 s): a reminder
# whose timer is processed in the same workflow task as the decision is not sent
# (it would go out after it), so the test keeps a second of margin either side.
REMIND = 2.0


async def test_approve_in_time_runs_the_next_task_after_the_reminders_due(
    cfg, temporal, db_pool, topics, approval_worker
):
    approved_before = metric_value(
        "pipeline_approval_decisions_total", missing_ok=True, outcome="approve"
    )
    waits_before = metric_value("pipeline_approval_wait_seconds_count", missing_ok=True)
    async with approval_worker():
        config = approval_task(sla_seconds=60, remind_every_seconds=REMIND, escalate_to="carol")
        run, task, inp = await start_approval_run(
            temporal, db_pool, cfg.temporal.task_queue, config
        )
        s = await wait_state(task, lambda s: s.status == "waiting")
        requested = at(s.audit[0].at)
        assert (
            s.audit[0].kind == "requested"
            and s.deadline == (requested + timedelta(seconds=60)).isoformat()
        )

        async def gauge_counts_it() -> bool:
            return metric_value("pipeline_approvals_waiting", missing_ok=True) >= 1

        await wait.eventually(gauge_counts_it, 10, "the waiting gauge to count the approval")
        # Nothing after the approval has started while it waits.
        assert (
            await db_pool.fetchval(
                "SELECT count(*) FROM task_instances WHERE run_id = $1::uuid"
                " AND task_type = 'emit'",
                inp.run_id,
            )
            == 0
        )

        # Decide half-way between two reminders (2 due: at +2 and +4 s).
        await sleep_until(requested + timedelta(seconds=2.5 * REMIND))
        result = await decide(task, "alice", "approve")
        assert result.status == "approved"
        outcome = await asyncio.wait_for(run.result(), 60)
        final = await state(task)  # a query needs a worker, even on a closed workflow

    assert (outcome.status, outcome.tasks_succeeded, outcome.tasks_skipped) == ("succeeded", 2, 0)
    decision = final.audit[-1]
    assert (decision.kind, decision.actor, decision.decision) == ("decision", "alice", "approve")
    decided = at(decision.at)
    waited = (decided - requested).total_seconds()
    assert decision.waited_seconds == waited
    # Reminders match the time waited: one per interval that ended before the decision.
    due = [requested + timedelta(seconds=k * REMIND) for k in range(1, int(waited / REMIND) + 2)]
    expected = [d for d in due if d < decided]
    reminders = [e for e in final.audit if e.kind == "reminder"]
    assert final.reminders_sent == len(reminders) == len(expected) >= 1
    sent = await notices(cfg, db_pool, topics.out, "approval.reminder")
    assert [at(n["due"]) for n in sent] == expected
    assert all(n["to"] == ["alice"] and n["task_id"] == task.id for n in sent)

    # The emit task after the approval ran, and only after the decision.
    emitted = await db_pool.fetchrow(
        "SELECT status, created_at FROM task_instances WHERE run_id = $1::uuid"
        " AND task_type = 'emit'",
        inp.run_id,
    )
    assert emitted["status"] == "succeeded" and emitted["created_at"] >= decided

    # The audit trail is in the database too, the same entries.
    rows = await events(db_pool, task.id)
    assert [(r["seq"], r["kind"]) for r in rows] == [(e.seq, e.kind) for e in final.audit]
    row = await db_pool.fetchrow("SELECT * FROM approvals WHERE task_id = $1", task.id)
    assert (row["status"], row["deadline"], row["approvers"]) == ("approved", None, ["alice"])
    assert row["closed_at"] is not None
    assert orjson.loads(row["payload"])["amount"] == 1200
    task_row = await db_pool.fetchrow(
        "SELECT status, attempts FROM task_instances WHERE id = $1", task.id
    )
    assert tuple(task_row) == ("succeeded", 1)
    approved = metric_value("pipeline_approval_decisions_total", outcome="approve")
    assert approved == approved_before + 1
    assert metric_value("pipeline_approval_wait_seconds_count") == waits_before + 1
