"""The starter gives a run Temporal's task priority when asked (flow.priority), and the
server's default otherwise; the run itself starts exactly as before."""

from __future__ import annotations

import uuid

from pipeline.starter import STARTED, Starter
from tests.support.runs import event_run


async def test_priority_reaches_the_server(temporal, task_queue) -> None:
    starter = Starter(temporal, task_queue)
    activity_id = str(uuid.uuid4())
    urgent, plain = event_run(activity_id), event_run(activity_id)
    assert await starter.start(urgent, priority=1) == STARTED
    assert await starter.start(plain) == STARTED
    keys = {}
    for run in (urgent, plain):
        handle = temporal.get_workflow_handle(run.workflow_id)
        keys[run.workflow_id] = (await handle.describe()).raw_info.priority.priority_key
        await handle.terminate("test over: no worker serves this queue")
    assert keys == {urgent.workflow_id: 1, plain.workflow_id: 0}  # 0: unset, the default 3
