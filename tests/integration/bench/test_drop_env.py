"""bench.common on the real dev server: a benchmark cut short leaves no workflow
running on its queues (``terminate_left_running``, called by ``drop_env``), and
touches no other queue's."""

from __future__ import annotations

import uuid

from temporalio.client import Client, WorkflowExecutionStatus

from bench.common import terminate_left_running
from tests.support.wait import eventually


async def _start(client: Client, queue: str) -> str:
    wid = f"bench-left-{uuid.uuid4()}"
    await client.start_workflow("NobodyRunsThis", id=wid, task_queue=queue)
    return wid


async def _status(client: Client, wid: str) -> WorkflowExecutionStatus | None:
    return (await client.get_workflow_handle(wid).describe()).status


async def test_the_environments_queues_are_emptied_and_no_other(temporal, task_queue):
    # a queue of its own, and one derived from it as bench.e2e's bare queue is
    mine = [await _start(temporal, task_queue), await _start(temporal, f"{task_queue}-bare")]
    theirs = await _start(temporal, f"x-{task_queue}")  # not a prefix match
    try:

        async def listed() -> bool:
            query = 'ExecutionStatus="Running"'
            seen = {w.id async for w in temporal.list_workflows(query)}
            return set(mine) | {theirs} <= seen

        await eventually(listed, timeout=20, what="the three runs listed")
        assert await terminate_left_running(temporal, task_queue) == 2
        for wid in mine:
            assert await _status(temporal, wid) == WorkflowExecutionStatus.TERMINATED
        assert await _status(temporal, theirs) == WorkflowExecutionStatus.RUNNING
    finally:
        await temporal.get_workflow_handle(theirs).terminate("test over")
