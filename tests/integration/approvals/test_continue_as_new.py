"""A resubmission loop runs through continue-as-new and keeps its state.

On the PRIVATE dev server of these tests (conftest: in memory, free port; the shared
stack is never touched), started with ``limit.historyCount.suggestContinueAsNew``
lowered, so the server suggests continue-as-new after a few rounds. The workflow id
(the task id of the contract) stays, the audit trail, counts and current payload
survive, and the task finishes once: one task_instances row, one child start in the
parent's history.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from temporalio.api.enums.v1 import EventType

from schemas.approval_io import ApprovalResubmission
from tests.support import wait
from workers.task_workflow import TaskInstanceWorkflow

from .conftest import (
    approval_task,
    at,
    decide,
    events,
    notices,
    replays,
    sleep_until,
    start_approval_run,
    state,
    wait_state,
)

ROUNDS = 6


async def test_resubmission_loop_continues_as_new_keeping_state(
    cfg, temporal, db_pool, approval_worker
):
    client = temporal
    async with approval_worker():
        run, task, inp = await start_approval_run(
            client, db_pool, cfg.temporal.task_queue, approval_task(sla_seconds=120)
        )
        await wait_state(task, lambda s: s.status == "waiting")
        first_run = (await task.describe()).run_id
        for i in range(1, ROUNDS + 1):
            await decide(task, "alice", "request_changes", f"round {i}: more detail")
            new = ApprovalResubmission("submitter", {"amount": 1200 + i, "n": i}, f"v{i}")
            await task.execute_update(TaskInstanceWorkflow.resubmit, new)
        await decide(task, "alice", "approve")
        outcome = await asyncio.wait_for(run.result(), 60)
        final = await state(task)
        last_run = (await task.describe()).run_id

    assert outcome.status == "succeeded" and outcome.tasks_succeeded == 2
    # It continued as new (more than once at this threshold), under the same id.
    assert final.continued_runs >= 1 and last_run != first_run
    assert task.id == final.task_id

    async def chain_listed() -> bool:
        runs = [w async for w in client.list_workflows(f"WorkflowId = '{task.id}'")]
        return len(runs) == final.continued_runs + 1

    await wait.eventually(chain_listed, 30, "visibility to list every run of the chain")

    # State carried across: the whole audit trail, the counts and the last payload.
    kinds = ["requested"] + ["decision", "resubmitted"] * ROUNDS + ["decision"]
    assert [e.kind for e in final.audit] == kinds
    assert [e.seq for e in final.audit] == list(range(len(kinds)))
    assert (final.round, final.resubmissions, final.status) == (ROUNDS + 1, ROUNDS, "approved")
    assert (final.payload["n"], final.payload["amount"]) == (ROUNDS, 1200 + ROUNDS)
    assert [e.round for e in final.audit if e.kind == "resubmitted"] == list(range(2, ROUNDS + 2))
    assert [(r["seq"], r["kind"]) for r in await events(db_pool, task.id)] == [
        (e.seq, e.kind) for e in final.audit
    ]

    # The task finished once: claimed and marked running by the first run only.
    rows = await db_pool.fetch(
        "SELECT id, status, attempts FROM task_instances WHERE run_id = $1::uuid ORDER BY index",
        inp.run_id,
    )
    assert [tuple(r) for r in rows] == [(task.id, "succeeded", 1), (rows[1]["id"], "succeeded", 1)]
    history = (await run.fetch_history()).events
    starts = [
        e for e in history
        if e.event_type == EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED
    ]  # fmt: skip
    completed = [
        e for e in history
        if e.event_type == EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED
    ]  # fmt: skip
    assert (len(starts), len(completed)) == (2, 2)


async def test_a_long_wait_with_reminders_continues_as_new_on_schedule(
    cfg, temporal, db_pool, topics, approval_worker
):
    """Each reminder adds ~10 events: the wait itself continues as new, and the reminder
    schedule carries over (every due time once, none skipped, none repeated)."""
    remind = 2.0  # a 1 s margin either side of the decision, for a loaded machine
    client = temporal
    config = approval_task(sla_seconds=120, remind_every_seconds=remind)
    async with approval_worker():
        run, task, _ = await start_approval_run(client, db_pool, cfg.temporal.task_queue, config)
        s = await wait_state(task, lambda s: s.status == "waiting")
        requested = at(s.audit[0].at)
        await wait_state(task, lambda s: s.continued_runs >= 1 and s.reminders_sent >= 4, 60)
        # Decide half-way between two reminders.
        now = datetime.now(UTC)
        k = int((now - requested).total_seconds() / remind) + 1
        await sleep_until(requested + timedelta(seconds=(k + 0.5) * remind))
        await decide(task, "alice", "approve")
        assert (await asyncio.wait_for(run.result(), 60)).status == "succeeded"
        final = await state(task)
    await replays(task)

    assert final.continued_runs >= 1
    decided = at(final.audit[-1].at)
    sent = await notices(cfg, db_pool, topics.out, "approval.reminder")
    dues = [at(n["due"]) for n in sent]
    assert dues == [requested + timedelta(seconds=i * remind) for i in range(1, len(dues) + 1)]
    assert [n["reminder"] for n in sent] == list(range(1, len(sent) + 1))
    written = [r["kind"] for r in await events(db_pool, task.id)]
    assert len(sent) == final.reminders_sent == written.count("reminder")
    assert dues[-1] < decided < dues[-1] + timedelta(seconds=remind)
