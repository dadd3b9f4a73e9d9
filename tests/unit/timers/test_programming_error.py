"""A bug in workflow code fails the workflow task, not the task.

Before the error tree, TaskInstanceWorkflow caught any ValueError around the
handler and marked the task failed, so a programming error looked like a task
outcome (and the run went on without it). Now only a failed activity and the
workers.errors outcomes end a task: a bug makes the workflow task fail and retry,
the task stays running, and a fixed worker picks it up where it was.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowExecutionStatus
from temporalio.testing import WorkflowEnvironment

import workers.task_workflow
from schemas.ids import task_workflow_id
from schemas.workflow_io import TaskInstanceInput, TaskSpec
from tests.unit.timers.conftest import WorkerFactory
from tests.unit.timers.fakes import Fakes
from workers.task_workflow import TaskInstanceWorkflow


def _bug(config: Any) -> Any:
    raise ValueError("a bug, not a task outcome")


async def test_a_bug_fails_the_workflow_task_and_leaves_the_task_running(
    time_env: WorkflowEnvironment, fake_worker: WorkerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The module is passed through the sandbox (workers.parts.CORE_WORKFLOW_MODULES),
    # so the workflow sees the patched function.
    monkeypatch.setattr(workers.task_workflow, "handler_options", _bug)
    fakes = Fakes()
    run_id = str(uuid.uuid4())
    task_id = task_workflow_id(run_id, "noop", 0)
    spec = TaskSpec("noop", 0)
    inp = TaskInstanceInput(task_id, run_id, str(uuid.uuid4()), spec, claim_running=True)
    async with fake_worker(fakes) as queue:
        handle = await time_env.client.start_workflow(
            TaskInstanceWorkflow.run, inp, id=task_id, task_queue=queue
        )
        for _ in range(100):  # until the first workflow task has failed
            events = [e.event_type async for e in handle.fetch_history_events()]
            if EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED in events:
                break
            await asyncio.sleep(0.05)
        desc = await handle.describe()
        await handle.terminate()

    assert EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED in events
    assert desc.status == WorkflowExecutionStatus.RUNNING
    # claimed (again on each retry of the workflow task), never marked failed
    assert fakes.states and set(fakes.states) == {"running"}
