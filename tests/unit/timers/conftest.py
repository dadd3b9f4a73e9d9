"""Workflow timer logic on Temporal's time-skipping test server (no stack needed).

The workflows are the production classes, run by a worker with the production
sandbox runner; their activities are fakes (``fakes.Fakes``) registered under the
production names, so what is tested is the workflow logic: which timers it sets,
what fires when, and what it records. Hours of SLA or lease pass in a moment.
The real-stack tests (tests/integration) keep covering the end-to-end behaviour.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager

import pytest
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from tests.support.time_skipping import time_skipping_env
from tests.unit.timers.fakes import Fakes
from workers.parts import CORE_WORKFLOW_MODULES
from workers.permits.workflow import PermitSlotWorkflow
from workers.run_workflow import RunActivityWorkflow
from workers.sandbox import workflow_runner
from workers.task_workflow import TaskInstanceWorkflow

WorkerFactory = Callable[[Fakes], AbstractAsyncContextManager[str]]


@pytest.fixture(scope="session")
async def time_env() -> AsyncIterator[WorkflowEnvironment]:
    async with time_skipping_env() as env:
        yield env


@pytest.fixture
def fake_worker(time_env: WorkflowEnvironment) -> WorkerFactory:
    """``async with fake_worker(fakes) as task_queue``: a worker of the run's workflows."""

    @asynccontextmanager
    async def run(fakes: Fakes) -> AsyncIterator[str]:
        queue = f"tq-{uuid.uuid4()}"
        async with Worker(
            time_env.client,
            task_queue=queue,
            workflows=[RunActivityWorkflow, TaskInstanceWorkflow, PermitSlotWorkflow],
            activities=fakes.all(),
            workflow_runner=workflow_runner(*CORE_WORKFLOW_MODULES),
        ):
            yield queue

    return run
