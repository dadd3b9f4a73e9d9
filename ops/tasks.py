"""Paused tasks: found through Temporal visibility, joined with the database, acted on.

A paused task is a running ``TaskInstanceWorkflow`` whose search attribute
``IngestStatus`` is ``PENDING_FIX`` (workers.fixes); its workflow id is its task
id. Visibility is eventually consistent: a task that just paused may take a
moment to be listed. Operator actions are the workflow's ``fix``, ``skip`` and
``abort`` Workflow Updates; their validators' refusals become 400 (a bad patch
or actor, naming the field) or 409 (not pending_fix), and write no history.
"""

from __future__ import annotations

import re
import uuid
from datetime import timedelta
from typing import Any

import asyncpg
from temporalio.client import Client, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from ops import store
from ops.errors import BadField, Conflict, NotFound, Unavailable, no_answer
from schemas import search_attributes as sa
from schemas.status import TaskStatus
from schemas.workflow_io import FixRequest, FixResult

ACTIONS = ("fix", "skip", "abort")
_SAFE = re.compile(r"^[A-Za-z0-9_.:-]{1,200}$")
# Validator refusals (workers.fixes) -> the API's answer.
_REFUSALS = {"InvalidPatch": "patch", "InvalidActor": "actor"}


def visibility_query(failed_task: str | None, activity: uuid.UUID | None) -> str:
    if failed_task is not None and not _SAFE.match(failed_task):
        raise BadField("failed_task", "letters, digits and _ . : - only")
    q = (
        'WorkflowType = "TaskInstanceWorkflow" AND ExecutionStatus = "Running"'
        f' AND {sa.STATUS.name} = "{sa.PENDING_FIX}"'
    )
    if failed_task is not None:
        q += f' AND {sa.FAILED_TASK.name} = "{failed_task}"'
    if activity is not None:
        q += f' AND {sa.ACTIVITY_ID.name} = "{activity}"'
    return q


async def paused_tasks(
    client: Client,
    pool: asyncpg.Pool,
    failed_task: str | None,
    activity: uuid.UUID | None,
    limit: int,
) -> list[dict[str, Any]]:
    """Tasks visibility lists as PENDING_FIX, with their rows (error, payload, attempts)."""
    ids: list[str] = []
    async for wf in client.list_workflows(visibility_query(failed_task, activity), limit=limit):
        ids.append(wf.id)
    rows = await store.tasks_by_id(pool, ids)
    # Visibility may lag the database by a moment either way: list what both agree on.
    return [rows[i] for i in ids if i in rows and rows[i]["status"] == TaskStatus.PENDING_FIX]


async def act(
    client: Client,
    pool: asyncpg.Pool,
    task_id: str,
    action: str,
    req: FixRequest,
    timeout: timedelta | None = None,
) -> FixResult:
    """Send ``action`` to the paused task; the answer once its audit row is written.

    Unavailable (503) when no worker answers within ``timeout``: the update may still
    be applied once one does (the task's row and ``GET /api/tasks/{id}`` will say)."""
    row = await store.get_task(pool, task_id)
    if row is None:
        raise NotFound(f"no task {task_id}")
    if row["status"] != TaskStatus.PENDING_FIX:
        raise Conflict(f"task {task_id} is {row['status']}, not pending_fix")
    handle = client.get_workflow_handle(task_id)
    try:
        return await handle.execute_update(action, req, result_type=FixResult, rpc_timeout=timeout)
    except WorkflowUpdateFailedError as exc:
        cause = exc.cause
        if isinstance(cause, ApplicationError):
            if cause.type in _REFUSALS:
                raise BadField(_REFUSALS[cause.type], cause.message) from None
            if cause.type == "NotPendingFix":
                raise Conflict(f"task {task_id}: {cause.message}") from None
        raise
    except Exception as exc:  # an RPCError, or the update's own timeout error
        if isinstance(exc, RPCError) and exc.status == RPCStatusCode.NOT_FOUND:
            raise Conflict(f"task {task_id} is not waiting for a fix: {exc.message}") from None
        if no_answer(exc):
            raise Unavailable(_unanswered(task_id, action, timeout)) from None
        raise


def _unanswered(task_id: str, action: str, timeout: timedelta | None) -> str:
    within = f" within {timeout.total_seconds():g} s" if timeout is not None else ""
    return (
        f"task {task_id}: no worker answered the {action}{within} (is a worker polling its"
        " task queue?); it may still be applied when one does: look before sending it again"
    )


async def temporal_status(client: Client, workflow_id: str) -> str | None:
    """``RUNNING``, ``COMPLETED``, ... of the workflow, or None if Temporal does not know it."""
    try:
        desc = await client.get_workflow_handle(workflow_id).describe()
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            return None
        if no_answer(exc):
            raise Unavailable(f"Temporal did not answer: {exc.message}") from None
        raise
    return desc.status.name if desc.status is not None else None
