"""Singleton: is the holder of a key still running (Temporal decides), and cancelling it.

The holder row (``flow_singleton``) is set with the decision and cleared by the worker
when the run finishes; it is a hint, Temporal is the truth. A holder Temporal reports
closed (terminated, timed out, or finished with its row left by a crash) is stale
and the new trigger takes the key. A holder Temporal does not know yet is a run whose
start is still in flight (or whose router died before starting it): it keeps the key
for :data:`START_GRACE` after it was recorded.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from pipeline.starter import outage

log = logging.getLogger(__name__)

START_GRACE = timedelta(minutes=5)


def _transient(exc: RPCError, what: str) -> Exception:
    # The router's retry loop retries ConnectionError (Temporal unavailable, overloaded).
    if outage(exc) is not None:
        return ConnectionError(f"{what}: {exc.status.name}: {exc.message}")
    return exc


async def holder_running(client: Client, workflow_id: str, since: datetime, now: datetime) -> bool:
    try:
        desc = await client.get_workflow_handle(workflow_id).describe()
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            return now - since < START_GRACE
        raise _transient(exc, f"describe singleton holder {workflow_id}") from exc
    return desc.status == WorkflowExecutionStatus.RUNNING


def cancel_reason(by_workflow_id: str) -> str:
    """The reason a ``mode: cancel`` singleton gives Temporal: the run reads it
    (``workflow.cancellation_reason()``) and its row ends ``cancelled`` with it as
    ``ended_by`` (workers/lifecycle.py), naming the run that took its key."""
    return f"singleton:{by_workflow_id}"


async def cancel(client: Client, workflow_id: str, by_workflow_id: str) -> None:
    """Request cancellation of ``workflow_id`` (the key's holder), which the run
    ``by_workflow_id`` replaces; one that is already closed is left as it is."""
    try:
        await client.get_workflow_handle(workflow_id).cancel(reason=cancel_reason(by_workflow_id))
    except RPCError as exc:
        if exc.status != RPCStatusCode.NOT_FOUND:
            raise _transient(exc, f"cancel singleton holder {workflow_id}") from exc
        log.debug("singleton holder %s already closed", workflow_id)
