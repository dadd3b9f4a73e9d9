"""Pause-and-fix in workflow time: a paused task waits without a timeout (weeks of
workflow time pass and it is still pending_fix), and a fix then retries it with
the patched payload. The real-stack equivalent is tests/integration/ops/test_pause_fix.py."""

from __future__ import annotations

import uuid
from datetime import timedelta

from temporalio.testing import WorkflowEnvironment

from schemas.ids import task_workflow_id
from schemas.workflow_io import (
    FixRequest,
    FixResult,
    FixState,
    TaskInstanceInput,
    TaskInstanceResult,
    TaskSpec,
)
from tests.unit.timers.conftest import WorkerFactory
from tests.unit.timers.fakes import Fakes, permanent
from workers.task_workflow import TaskInstanceWorkflow


async def test_a_paused_task_waits_for_its_fix_for_weeks(
    time_env: WorkflowEnvironment, fake_worker: WorkerFactory
) -> None:
    fakes = Fakes(handler_outcomes=[permanent("bad account"), None])
    run_id = str(uuid.uuid4())
    task_id = task_workflow_id(run_id, "webhook", 0)
    spec = TaskSpec("webhook", 0, {"account": "x"}, {"max_attempts": 1}, on_failure="pause")
    inp = TaskInstanceInput(task_id, run_id, str(uuid.uuid4()), spec, claim_running=True)
    async with fake_worker(fakes) as queue:
        handle = await time_env.client.start_workflow(
            TaskInstanceWorkflow.run, inp, id=task_id, task_queue=queue
        )
        await time_env.sleep(timedelta(days=30))
        paused: FixState = await handle.query(TaskInstanceWorkflow.fix_state)
        assert (paused.status, paused.error) == ("pending_fix", "Broken: bad account")
        # By name, as ops.tasks sends it: temporalio types an update declared with
        # ``@workflow.update(name=...)`` as returning the coroutine, not its result.
        await handle.execute_update(
            "fix", FixRequest(actor="dave", patch={"account": "y"}), result_type=FixResult
        )
        result: TaskInstanceResult = await handle.result()

    assert result.status == "succeeded"
    assert fakes.states == ["running", "pending_fix", "running", "succeeded"]
    assert [p["account"] for p in fakes.handler_payloads] == ["x", "y"]
    assert fakes.fixes == ["fix"]
