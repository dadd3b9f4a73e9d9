"""A local task claimed in its handler step (``claim_in_step``): the paths of the fold.

``run_local_task`` claims the task, runs its handler and marks it succeeded in one
step. These tests drive the production TaskInstanceWorkflow against fakes that
answer each path: the claim made, a duplicate, a task finished earlier, a claim
the database did not answer, a handler that fails, and a fix after a pause. The
real-stack test is ``tests/integration/workers/test_run_workflow.py``
(``test_a_local_task_is_claimed_run_and_finished_in_one_step``).
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from schemas.ids import task_workflow_id
from schemas.workflow_io import (
    FixRequest,
    FixResult,
    TaskInstanceInput,
    TaskInstanceResult,
    TaskSpec,
    TaskStateResult,
)
from tests.unit.timers.conftest import WorkerFactory
from tests.unit.timers.fakes import Fakes, permanent
from workers.task_workflow import TaskInstanceWorkflow


def _input(**spec: Any) -> TaskInstanceInput:
    run_id = str(uuid.uuid4())
    task_spec = TaskSpec("noop", 0, {"n": 1}, {"max_attempts": 1}, local=True, **spec)
    task_id = task_workflow_id(run_id, "noop", 0)
    return TaskInstanceInput(
        task_id, run_id, str(uuid.uuid4()), task_spec, claim_running=True, claim_in_step=True
    )


async def _run(
    env: WorkflowEnvironment, worker: WorkerFactory, fakes: Fakes, inp: TaskInstanceInput
) -> TaskInstanceResult:
    async with worker(fakes) as queue:
        return await env.client.execute_workflow(  # type: ignore[no-any-return]
            TaskInstanceWorkflow.run, inp, id=inp.task_id, task_queue=queue
        )


async def test_the_claim_handler_and_finish_are_one_step(
    time_env: WorkflowEnvironment, fake_worker: WorkerFactory
) -> None:
    fakes = Fakes()
    result = await _run(time_env, fake_worker, fakes, _input())
    assert result.status == "succeeded"
    assert (fakes.local_steps, fakes.states, len(fakes.handler_payloads)) == (1, [], 1)


@pytest.mark.parametrize(
    "claim",
    [TaskStateResult(claimed=False, status="duplicate"), TaskStateResult(True, "failed")],
    ids=["a duplicate", "finished earlier"],
)
async def test_a_settled_task_runs_no_handler(
    time_env: WorkflowEnvironment, fake_worker: WorkerFactory, claim: TaskStateResult
) -> None:
    fakes = Fakes(local_claims=[claim])
    result = await _run(time_env, fake_worker, fakes, _input())
    assert result.status == claim.status
    assert (fakes.local_steps, fakes.states, fakes.handler_payloads) == (1, [], [])


async def test_a_claim_the_database_did_not_answer_is_made_by_the_workflow(
    time_env: WorkflowEnvironment, fake_worker: WorkerFactory
) -> None:
    fakes = Fakes(local_claims=[None])
    result = await _run(time_env, fake_worker, fakes, _input())
    assert result.status == "succeeded"
    # its own claim step, then run_handler (which did not finish it), then succeeded
    assert fakes.states == ["running", "succeeded"]
    assert (fakes.local_steps, len(fakes.handler_payloads)) == (1, 1)


async def test_a_failed_step_is_claimed_before_the_task_fails(
    time_env: WorkflowEnvironment, fake_worker: WorkerFactory
) -> None:
    fakes = Fakes(handler_outcomes=[permanent("boom")])
    result = await _run(time_env, fake_worker, fakes, _input())
    assert (result.status, result.error) == ("failed", "Broken: boom")
    assert fakes.states == ["running", "failed"]


async def test_a_fix_retries_with_run_handler_not_a_second_claim(
    time_env: WorkflowEnvironment, fake_worker: WorkerFactory
) -> None:
    fakes = Fakes(handler_outcomes=[permanent("bad"), None])
    inp = _input(on_failure="pause")
    async with fake_worker(fakes) as queue:
        handle = await time_env.client.start_workflow(
            TaskInstanceWorkflow.run, inp, id=inp.task_id, task_queue=queue
        )
        while "pending_fix" not in fakes.states:
            await time_env.sleep(1)
        # By name, as ops.tasks sends it: temporalio types an update declared with
        # ``@workflow.update(name=...)`` as returning the coroutine, not its result.
        await handle.execute_update(
            "fix", FixRequest(actor="dave", patch={"n": 2}), result_type=FixResult
        )
        result: TaskInstanceResult = await handle.result()
    assert result.status == "succeeded"
    assert fakes.states == ["running", "pending_fix", "running", "succeeded"]
    assert fakes.local_steps == 1
    assert [p["n"] for p in fakes.handler_payloads] == [1, 2]
