"""Close the approvals whose workflow closed without closing them.

The workflow closes its approval on every path it runs code on (a decision, a
deadline, a cancellation, a failure: ``machine.py``). Two paths run no workflow code:
a termination (by an operator, or by the parent's close policy when the run is
terminated) and a run or execution timeout. The approvals part sweeps for those
beside its gauge refresh: the open rows' workflows that Temporal visibility lists
as closed are closed as ``terminated`` (or ``cancelled`` / ``failed`` as Temporal
says), with an audit entry naming the workflow's status, and a log line.

A row whose workflow this namespace does not know (another namespace's, or one
retention has forgotten) is left alone: "not found" is not "closed".
"""

from __future__ import annotations

import logging

import asyncpg
from temporalio.client import Client, WorkflowExecutionStatus

from schemas.approval_io import CANCELLED, FAILED, TERMINATED
from workers.approvals import store

log = logging.getLogger(__name__)

_BATCH = 100  # workflow ids per visibility query
_STATUS_OF_CLOSE = {
    WorkflowExecutionStatus.TERMINATED: TERMINATED,
    WorkflowExecutionStatus.TIMED_OUT: TERMINATED,
    WorkflowExecutionStatus.CANCELED: CANCELLED,
}


def _query(task_ids: list[str]) -> str:
    quoted = ", ".join("'" + t.replace("'", "''") + "'" for t in task_ids)
    return f"WorkflowId IN ({quoted}) AND ExecutionStatus != 'Running'"


async def sweep(client: Client, pool: asyncpg.Pool) -> int:
    """Close the open approvals whose workflow is closed; returns how many it closed."""
    open_ids = await store.open_task_ids(pool)
    done = 0
    for i in range(0, len(open_ids), _BATCH):
        batch = open_ids[i : i + _BATCH]
        async for wf in client.list_workflows(_query(batch)):
            if wf.status in (None, WorkflowExecutionStatus.CONTINUED_AS_NEW):
                continue  # an earlier run of a chain: its last run decides
            status = _STATUS_OF_CLOSE.get(wf.status, FAILED)
            reason = f"its workflow closed as {wf.status.name} without closing the approval"
            if await store.close_without_decision(pool, wf.id, status, reason):
                log.warning("approval %s %s: %s", wf.id, status, reason)
                done += 1
    return done
