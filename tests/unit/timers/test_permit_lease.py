"""A permit's lease in workflow time: the slot workflow ends at its lease, and only
then can the slot (its workflow id) be taken again. The real-stack equivalent,
tests/integration/permits/test_lease.py, waits out leases of seconds."""

from __future__ import annotations

from datetime import timedelta

import pytest
from temporalio.client import WorkflowHandle
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.testing import WorkflowEnvironment

from schemas.ids import permit_workflow_id
from schemas.workflow_io import PermitReleaseSignal, PermitSlotInput
from tests.unit.timers.conftest import WorkerFactory
from tests.unit.timers.fakes import Fakes
from workers.permits.workflow import PermitSlotWorkflow, lease_grace

LEASE = 2 * 3600.0


async def _hold(
    env: WorkflowEnvironment, queue: str, slot: str
) -> WorkflowHandle[PermitSlotWorkflow, str]:
    return await env.client.start_workflow(
        PermitSlotWorkflow.run,
        PermitSlotInput("gpu", slot, LEASE, holder="task-a"),
        id=permit_workflow_id("gpu", slot),
        task_queue=queue,
        execution_timeout=timedelta(seconds=LEASE + lease_grace(LEASE)),
    )


async def test_a_silent_holder_loses_the_slot_at_its_lease(
    time_env: WorkflowEnvironment, fake_worker: WorkerFactory
) -> None:
    fakes = Fakes()
    async with fake_worker(fakes) as queue:
        first = await _hold(time_env, queue, "0")
        await time_env.sleep(timedelta(seconds=LEASE - 60))
        with pytest.raises(WorkflowAlreadyStartedError):  # still held a minute before
            await _hold(time_env, queue, "0")
        assert await first.result() == "lease_expired"
        desc = await first.describe()
        assert desc.close_time is not None and desc.start_time is not None
        held = (desc.close_time - desc.start_time).total_seconds()
        assert LEASE <= held < LEASE + lease_grace(LEASE)  # the in-workflow timer won
        second = await _hold(time_env, queue, "0")  # the slot is free again
        await second.signal(PermitSlotWorkflow.release, PermitReleaseSignal())
        assert await second.result() == "released"
    assert fakes.permits_ended == ["lease_expired", "released"]
