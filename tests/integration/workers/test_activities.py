"""Activities repeated as Temporal retries would repeat them, against the real PostgreSQL."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid

import pytest
from prometheus_client import REGISTRY
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from schemas.ids import task_workflow_id
from schemas.workflow_io import (
    FinishRunInput,
    LocalTaskResult,
    LogRunInput,
    PlanTasksInput,
    RunHandlerInput,
    TaskSpec,
    TaskStateInput,
    TaskStateResult,
)
from tests.support.runs import event_run, insert_activity, registry_with
from workers.activities import RunActivities
from workers.handlers import load_registry


def metric(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


@pytest.fixture
def acts(db_pool) -> RunActivities:
    return RunActivities(db_pool, load_registry(use_entry_points=False))


async def test_log_run_twice_inserts_once(acts, db_pool):
    env = ActivityEnvironment()
    run = event_run(str(uuid.uuid4()))
    existing = metric("pipeline_runs_logged_total", result="existing")
    assert (await env.run(acts.log_run, LogRunInput(run))).inserted is True
    assert (await env.run(acts.log_run, LogRunInput(run))).inserted is False
    assert metric("pipeline_runs_logged_total", result="existing") == existing + 1
    n = await db_pool.fetchval("SELECT count(*) FROM activity_runs WHERE run_id = $1::uuid",
                               run.run_id)  # fmt: skip
    assert n == 1
    await env.run(acts.finish_run, FinishRunInput(run.run_id, "succeeded"))
    first = await db_pool.fetchval(
        "SELECT finished_at FROM activity_runs WHERE run_id = $1::uuid", run.run_id
    )
    await env.run(acts.finish_run, FinishRunInput(run.run_id, "succeeded"))
    again = await db_pool.fetchval(
        "SELECT finished_at FROM activity_runs WHERE run_id = $1::uuid", run.run_id
    )
    assert first == again


async def test_log_run_refuses_a_run_id_not_derived_from_the_workflow_id(acts):
    run = event_run(str(uuid.uuid4()))
    bad = type(run)(**{**run.__dict__, "run_id": str(uuid.uuid4())})
    with pytest.raises(ApplicationError, match="run_id_for") as info:
        await ActivityEnvironment().run(acts.log_run, LogRunInput(bad))
    assert info.value.non_retryable


async def test_plan_reads_the_definition_and_rejects_a_bad_one(acts, db_pool):
    env = ActivityEnvironment()
    good = await insert_activity(db_pool, [{"type": "emit", "count": 2}])
    plan = await env.run(acts.plan_tasks, PlanTasksInput(event_run(good)))
    assert [(t.task_type, t.index) for t in plan.tasks] == [("emit", 0), ("emit", 1)]
    bad = await insert_activity(db_pool, [{"type": "emit", "count": 0}])
    with pytest.raises(ApplicationError, match=r"tasks\[0\]\.count") as info:
        await env.run(acts.plan_tasks, PlanTasksInput(event_run(bad)))
    assert info.value.non_retryable
    with pytest.raises(ApplicationError, match="does not exist"):
        await env.run(acts.plan_tasks, PlanTasksInput(event_run(str(uuid.uuid4()))))


async def test_task_state_transitions_are_safe_to_repeat(acts, db_pool):
    env = ActivityEnvironment()
    run_id = str(uuid.uuid4())
    spec = TaskSpec("noop", 0, payload={"p": 1}, idempotency_key=f"k-{run_id}")
    holder = task_workflow_id(run_id, "noop", 0)
    other = task_workflow_id(run_id, "noop", 1)
    other_spec = TaskSpec("noop", 1, idempotency_key=spec.idempotency_key)

    async def state(task_id: str, status: str, s: TaskSpec = spec, error: str | None = None):
        return await env.run(acts.set_task_state, TaskStateInput(task_id, run_id, s, status, error))

    dup_before = metric("pipeline_task_instances_total", task_type="noop", status="duplicate")
    for _ in range(2):  # a retried 'pending' must give the same answer
        assert (await state(holder, "pending")).claimed is True
        assert (await state(other, "pending", other_spec)).claimed is False
    assert metric("pipeline_task_instances_total", task_type="noop", status="duplicate") == (
        dup_before + 1
    )
    for _ in range(2):
        assert (await state(holder, "running")).status == "running"
    # A retried 'pending' after 'running' neither un-claims nor rewinds.
    assert (await state(holder, "pending")).claimed is True
    await state(holder, "succeeded")
    late = await state(holder, "failed", error="late retry")
    assert late.status == "succeeded"  # terminal states are final

    rows = {
        r["id"]: r
        for r in await db_pool.fetch("SELECT * FROM task_instances WHERE run_id = $1::uuid", run_id)
    }
    assert (rows[holder]["status"], rows[holder]["attempts"]) == ("succeeded", 1)
    assert rows[holder]["idempotency_key"] == spec.idempotency_key
    assert rows[holder]["last_error"] is None
    assert (rows[other]["status"], rows[other]["duplicate_of"]) == ("duplicate", holder)
    assert rows[other]["idempotency_key"] is None


async def test_task_state_rejects_unknown_status_and_missing_row(acts):
    env = ActivityEnvironment()
    spec = TaskSpec("noop", 0)
    with pytest.raises(ApplicationError, match="status must be one of"):
        await env.run(acts.set_task_state, TaskStateInput("t", str(uuid.uuid4()), spec, "bogus"))
    with pytest.raises(ApplicationError, match="set it pending first"):
        await env.run(acts.set_task_state, TaskStateInput("t", str(uuid.uuid4()), spec, "running"))


async def test_concurrent_claims_of_one_key_give_exactly_one_holder(acts, db_pool):
    import asyncio

    env = ActivityEnvironment()
    run_id = str(uuid.uuid4())
    key = f"k-{run_id}"
    inputs = [
        TaskStateInput(task_workflow_id(run_id, "noop", i), run_id, TaskSpec("noop", i,
                       idempotency_key=key), "pending")
        for i in range(8)
    ]  # fmt: skip
    results = await asyncio.gather(*(env.run(acts.set_task_state, i) for i in inputs))
    assert sum(r.claimed for r in results) == 1
    holder = await db_pool.fetchval("SELECT id FROM task_instances WHERE idempotency_key = $1", key)
    dups = await db_pool.fetch(
        "SELECT duplicate_of FROM task_instances WHERE run_id = $1::uuid AND status = 'duplicate'",
        run_id,
    )
    assert [d["duplicate_of"] for d in dups] == [holder] * 7


async def test_start_run_logs_once_and_plans_like_the_two_steps(acts, db_pool):
    env = ActivityEnvironment()
    good = await insert_activity(db_pool, [{"type": "emit", "count": 2}])
    run = event_run(good)
    existing = metric("pipeline_runs_logged_total", result="existing")
    first = await env.run(acts.start_run, PlanTasksInput(run))
    again = await env.run(acts.start_run, PlanTasksInput(run))  # a retry: insert-or-nothing
    two_step = await env.run(acts.plan_tasks, PlanTasksInput(run))
    assert first == again == two_step
    assert metric("pipeline_runs_logged_total", result="existing") == existing + 1
    n = await db_pool.fetchval(
        "SELECT count(*) FROM activity_runs WHERE run_id = $1::uuid", run.run_id
    )
    assert n == 1
    # The run is recorded even when its plan fails, so the workflow can finish it failed.
    bad = event_run(str(uuid.uuid4()))
    with pytest.raises(ApplicationError, match="does not exist") as info:
        await env.run(acts.start_run, PlanTasksInput(bad))
    assert info.value.non_retryable
    await env.run(acts.finish_run, FinishRunInput(bad.run_id, "failed"))


async def test_claim_running_is_claim_then_running_in_one_step(acts, db_pool):
    env = ActivityEnvironment()
    run_id = str(uuid.uuid4())
    spec = TaskSpec("noop", 0, idempotency_key=f"k-{run_id}")
    holder, other = task_workflow_id(run_id, "noop", 0), task_workflow_id(run_id, "noop", 1)
    other_spec = TaskSpec("noop", 1, idempotency_key=spec.idempotency_key)
    pending_before = metric("pipeline_task_instances_total", task_type="noop", status="pending")

    async def claim(task_id: str, s: TaskSpec = spec):
        return await env.run(
            acts.set_task_state, TaskStateInput(task_id, run_id, s, "running", claim=True)
        )

    for _ in range(2):  # a retry repeats the answer and counts nothing twice
        got = await claim(holder)
        assert (got.claimed, got.status) == (True, "running")
        assert (await claim(other, other_spec)).claimed is False
    assert metric("pipeline_task_instances_total", task_type="noop", status="pending") == (
        pending_before + 1
    )
    # A row an older execution left pending (claimed, not yet running) is advanced.
    late = task_workflow_id(run_id, "noop", 2)
    late_spec = TaskSpec("noop", 2)
    await env.run(acts.set_task_state, TaskStateInput(late, run_id, late_spec, "pending"))
    assert (await claim(late, late_spec)).status == "running"
    rows = {
        r["id"]: r
        for r in await db_pool.fetch("SELECT * FROM task_instances WHERE run_id = $1::uuid", run_id)
    }
    assert (rows[holder]["status"], rows[holder]["attempts"]) == ("running", 1)
    assert (rows[late]["status"], rows[late]["attempts"]) == ("running", 1)
    assert (rows[other]["status"], rows[other]["duplicate_of"]) == ("duplicate", holder)


async def test_a_short_handler_step_marks_its_task_succeeded_once(acts, db_pool):
    env = ActivityEnvironment()
    run_id = str(uuid.uuid4())
    task_id = task_workflow_id(run_id, "noop", 0)
    spec = TaskSpec("noop", 0, local=True)
    await env.run(acts.set_task_state, TaskStateInput(task_id, run_id, spec, "running", claim=True))
    ok_before = metric("pipeline_task_instances_total", task_type="noop", status="succeeded")
    step = RunHandlerInput(task_id, run_id, str(uuid.uuid4()), spec, finish=True)
    for _ in range(2):  # a repeat (the step re-run after a crash) changes nothing
        assert await env.run(acts.run_handler, step) is True
    row = await db_pool.fetchrow("SELECT status FROM task_instances WHERE id = $1", task_id)
    assert row["status"] == "succeeded"
    assert metric("pipeline_task_instances_total", task_type="noop", status="succeeded") == (
        ok_before + 1
    )
    # Without finish the step leaves the row to the workflow's own step.
    other = task_workflow_id(run_id, "noop", 1)
    other_spec = TaskSpec("noop", 1)
    await env.run(
        acts.set_task_state, TaskStateInput(other, run_id, other_spec, "running", claim=True)
    )
    assert await env.run(acts.run_handler, RunHandlerInput(other, run_id, "a", other_spec)) is None
    row = await db_pool.fetchrow("SELECT status FROM task_instances WHERE id = $1", other)
    assert row["status"] == "running"


async def test_a_local_task_step_claims_runs_and_finishes_once(db_pool):
    """run_local_task: the claim, the handler and the finish. A repeat of the step
    after it finished, and a second task with the same key, run no handler."""
    calls: list[str] = []

    async def probe(ctx) -> None:
        calls.append(ctx.task_id)

    acts = RunActivities(db_pool, registry_with(probe=probe))
    env = ActivityEnvironment()
    run_id = str(uuid.uuid4())
    key = f"k-{uuid.uuid4()}"
    first, second = (task_workflow_id(run_id, "probe", i) for i in (0, 1))
    specs = [TaskSpec("probe", i, idempotency_key=key, local=True) for i in (0, 1)]
    step = RunHandlerInput(first, run_id, "a", specs[0], finish=True)
    done = await env.run(acts.run_local_task, step)
    assert done == LocalTaskResult(TaskStateResult(True, "running"), finished=True)
    again = await env.run(acts.run_local_task, step)  # the step re-run after a crash
    assert again == LocalTaskResult(TaskStateResult(True, "succeeded"))
    dup_step = RunHandlerInput(second, run_id, "a", specs[1], finish=True)
    dup = await env.run(acts.run_local_task, dup_step)
    assert dup == LocalTaskResult(TaskStateResult(False, "duplicate"))
    assert calls == [first]
    rows = await db_pool.fetch(
        "SELECT id, status, attempts FROM task_instances WHERE run_id = $1::uuid ORDER BY id",
        run_id,
    )
    assert [tuple(r) for r in rows] == [(first, "succeeded", 1), (second, "duplicate", 0)]


class NoDatabase:
    async def execute(self, *args):
        raise ConnectionRefusedError("the database went away")

    def acquire(self):
        raise ConnectionRefusedError("the database went away")


async def test_a_local_task_step_leaves_its_claim_to_the_workflow_when_the_database_is_away():
    """No claim, no handler run: the step answers claim=None, spending no attempt."""
    calls: list[int] = []

    async def probe(ctx) -> None:
        calls.append(ctx.attempt)

    acts = RunActivities(NoDatabase(), registry_with(probe=probe))
    run_id = str(uuid.uuid4())
    spec = TaskSpec("probe", 0, local=True)
    step = RunHandlerInput(task_workflow_id(run_id, "probe", 0), run_id, "a", spec, finish=True)
    assert await ActivityEnvironment().run(acts.run_local_task, step) == LocalTaskResult(None)
    assert calls == []


async def test_a_handler_step_survives_a_database_outage(db_pool):
    """The database is away: noting a retry's attempt and marking the task succeeded
    fail, yet the handler runs and succeeds (no attempt spent, no re-run), and the
    step returns False so the workflow's own unlimited-retry step writes the success."""

    calls: list[int] = []

    async def probe(ctx) -> None:
        calls.append(ctx.attempt)

    acts = RunActivities(NoDatabase(), registry_with(probe=probe))
    run_id = str(uuid.uuid4())
    step = RunHandlerInput(
        task_workflow_id(run_id, "probe", 0), run_id, "a", TaskSpec("probe", 0), finish=True
    )
    env = ActivityEnvironment()
    assert await env.run(acts.run_handler, step) is False
    env.info = dataclasses.replace(env.info, attempt=2)  # a retry notes its attempt first
    assert await env.run(acts.run_handler, step) is False
    assert calls == [1, 2]


async def test_the_last_task_to_succeed_finishes_its_run_once(acts, db_pool):
    """Three tasks of a run marked succeeded at once, each step knowing the plan's size:
    exactly one of them finishes the run (status, finished_at, its singleton key freed);
    a repeat changes nothing. A run with a task that did not succeed is left running."""
    run = event_run(await insert_activity(db_pool, [{"type": "noop", "count": 3}]))
    await ActivityEnvironment().run(acts.log_run, LogRunInput(run))
    await db_pool.execute(
        "INSERT INTO flow_singleton (activity_id, key, workflow_id) VALUES ($1::uuid, 'k', $2)",
        run.activity_id,
        run.workflow_id,
    )
    specs = [TaskSpec("noop", i) for i in range(3)]
    ids = [task_workflow_id(run.run_id, "noop", i) for i in range(3)]
    for task_id, spec in zip(ids, specs, strict=True):
        claim = TaskStateInput(task_id, run.run_id, spec, "running", claim=True)
        await ActivityEnvironment().run(acts.set_task_state, claim)

    def succeed(i: int) -> TaskStateInput:
        return TaskStateInput(ids[i], run.run_id, specs[i].key_only(), "succeeded", run_tasks=3)

    done = await asyncio.gather(
        *(ActivityEnvironment().run(acts.set_task_state, succeed(i)) for i in range(3))
    )
    assert sorted(d.run_finished for d in done) == [False, False, True]
    assert {(d.claimed, d.status) for d in done} == {(True, "succeeded")}
    row = await db_pool.fetchrow("SELECT * FROM activity_runs WHERE run_id = $1::uuid", run.run_id)
    assert (row["status"], row["tasks_succeeded"]) == ("succeeded", 3)
    assert row["finished_at"] is not None
    singleton = "SELECT count(*) FROM flow_singleton WHERE workflow_id = $1"
    assert await db_pool.fetchval(singleton, run.workflow_id) == 0
    again = await ActivityEnvironment().run(acts.set_task_state, succeed(2))
    assert again == TaskStateResult(True, "succeeded")  # a repeat: not finished twice
    after = await db_pool.fetchrow(
        "SELECT * FROM activity_runs WHERE run_id = $1::uuid", run.run_id
    )
    assert (after["tasks_succeeded"], after["finished_at"]) == (3, row["finished_at"])

    # One task of three failed: the two that succeeded are counted, the run left to the
    # workflow's finish step.
    other = event_run(run.activity_id)
    await ActivityEnvironment().run(acts.log_run, LogRunInput(other))
    other_ids = [task_workflow_id(other.run_id, "noop", i) for i in range(3)]
    for task_id, spec, status in zip(
        other_ids, specs, ("succeeded", "failed", "succeeded"), strict=True
    ):
        await ActivityEnvironment().run(
            acts.set_task_state, TaskStateInput(task_id, other.run_id, spec, "running", claim=True)
        )
        step = TaskStateInput(task_id, other.run_id, spec.key_only(), status, run_tasks=3)
        assert (await ActivityEnvironment().run(acts.set_task_state, step)).run_finished is False
    left = await db_pool.fetchrow(
        "SELECT status, tasks_succeeded, finished_at FROM activity_runs WHERE run_id = $1::uuid",
        other.run_id,
    )
    assert tuple(left) == ("running", 2, None)
