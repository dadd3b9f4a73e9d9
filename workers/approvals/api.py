"""What the ops service calls for approvals (``GET /api/approvals``,
``POST /api/tasks/{task_id}/decision``), free of any web framework.

* :func:`list_approvals` reads the ``approvals`` table (one row per approval task,
  kept current by the workers), so listing costs one query, not a Temporal call per
  task; :func:`approval_state` asks the workflow itself (the ``approval`` query).
* :func:`send_decision` / :func:`send_resubmission` run the ``decide`` /
  ``resubmit`` Workflow Updates and return once the decision is in the audit trail
  (workflow state and database).

Errors are :class:`ApprovalApiError` with the HTTP status the ops API should answer:
400 a bad argument (naming the field), 403 a person who may not decide, 404 an
unknown task or one that is not an approval, 409 a task not in a state that
accepts the request (closed, or waiting for something else), 503 no answer within
``timeout`` (no worker polls the task queue, or Temporal is unreachable).
"""

from __future__ import annotations

from dataclasses import asdict
from datetime import timedelta
from typing import Any

import asyncpg
from temporalio.client import (
    Client,
    WorkflowUpdateFailedError,
    WorkflowUpdateRPCTimeoutOrCancelledError,
)
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from schemas.approval_io import (
    CHANGES_REQUESTED,
    CLOSED,
    DECIDABLE,
    DECISIONS,
    OPEN,
    ApprovalDecision,
    ApprovalResubmission,
    ApprovalState,
    ApprovalUpdateResult,
)
from schemas.errors import IngestError
from workers.approvals import rules, store

# ``status=`` of the list: "waiting" means waiting for a decision (incl. escalated).
STATUS_FILTERS: dict[str, list[str]] = {
    "waiting": list(DECIDABLE),
    "changes_requested": [CHANGES_REQUESTED],
    "open": list(OPEN),
    "closed": list(CLOSED),
}
_HTTP_OF_REFUSAL = {
    rules.INVALID: 400,
    rules.NOT_ALLOWED: 403,
    rules.NOT_AN_APPROVAL: 404,
    rules.NOT_OPEN: 409,
}
# The RPC ran out of time (rpc_timeout: CANCELLED) or Temporal is unreachable.
_NO_ANSWER = (RPCStatusCode.CANCELLED, RPCStatusCode.DEADLINE_EXCEEDED, RPCStatusCode.UNAVAILABLE)


class ApprovalApiError(IngestError):
    """``status``: the HTTP answer; ``field``: the argument at fault (400 and 403)."""

    def __init__(self, status: int, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.field = field


async def list_approvals(
    pool: asyncpg.Pool, status: str = "waiting", approver: str | None = None, limit: int = 100
) -> list[dict[str, Any]]:
    """JSON-ready rows, soonest deadline first. ``approver``: what that person may decide."""
    if status not in STATUS_FILTERS:
        raise ApprovalApiError(400, f"must be one of {', '.join(STATUS_FILTERS)}", "status")
    if not 1 <= limit <= 1000:
        raise ApprovalApiError(400, "must be between 1 and 1000", "limit")
    rows = await store.list_approvals(pool, STATUS_FILTERS[status], approver or None, limit)
    out = []
    for row in rows:
        item = asdict(row)
        for key in ("deadline", "requested_at", "updated_at"):
            item[key] = item[key].isoformat() if item[key] is not None else None
        out.append(item)
    return out


def _api_error(task_id: str, exc: Exception) -> ApprovalApiError:
    if isinstance(exc, WorkflowUpdateFailedError):
        cause = exc.cause
        if isinstance(cause, ApplicationError) and cause.type in _HTTP_OF_REFUSAL:
            field = str(cause.details[0]) if cause.details else None
            return ApprovalApiError(_HTTP_OF_REFUSAL[cause.type], cause.message, field)
        return ApprovalApiError(409, f"task {task_id}: {cause}")
    if isinstance(exc, RPCError) and exc.status == RPCStatusCode.NOT_FOUND:
        if "completed" in exc.message.lower():
            return ApprovalApiError(409, f"task {task_id} is closed")
        return ApprovalApiError(404, f"no task {task_id}")
    if isinstance(exc, RPCError) and exc.status == RPCStatusCode.FAILED_PRECONDITION:
        return ApprovalApiError(409, f"task {task_id}: {exc.message}")
    raise exc


def _no_answer(task_id: str, what: str, timeout: timedelta | None) -> ApprovalApiError:
    within = f" within {timeout.total_seconds():g} s" if timeout is not None else ""
    return ApprovalApiError(
        503, f"task {task_id}: no worker answered the {what}{within} (is a worker polling"
        " its task queue?)",
    )  # fmt: skip


async def _update(
    client: Client, task_id: str, name: str, arg: Any, timeout: timedelta | None
) -> ApprovalUpdateResult:
    handle = client.get_workflow_handle(task_id)
    try:
        return await handle.execute_update(
            name, arg, result_type=ApprovalUpdateResult, rpc_timeout=timeout
        )
    except WorkflowUpdateRPCTimeoutOrCancelledError:
        # Admitted, maybe: it is applied once a worker runs (a second one is then refused).
        raise _no_answer(task_id, f"{name} update", timeout) from None
    except RPCError as exc:
        if exc.status in _NO_ANSWER:
            raise _no_answer(task_id, f"{name} update", timeout) from None
        raise _api_error(task_id, exc) from exc
    except WorkflowUpdateFailedError as exc:
        raise _api_error(task_id, exc) from exc


async def send_decision(
    client: Client,
    task_id: str,
    by: str,
    decision: str,
    reason: str | None = None,
    timeout: timedelta | None = None,
) -> ApprovalUpdateResult:
    """Apply a decision; raises :class:`ApprovalApiError` when it is refused."""
    if not by.strip():
        raise ApprovalApiError(400, "who decides must be named", "by")
    if decision not in DECISIONS:
        raise ApprovalApiError(400, f"must be one of {', '.join(DECISIONS)}", "decision")
    arg = ApprovalDecision(by, decision, reason)
    return await _update(client, task_id, "decide", arg, timeout)


async def send_resubmission(
    client: Client,
    task_id: str,
    by: str,
    payload: dict[str, Any],
    note: str | None = None,
    timeout: timedelta | None = None,
) -> ApprovalUpdateResult:
    """Resubmit after ``request_changes``; raises :class:`ApprovalApiError` when refused."""
    if not isinstance(payload, dict):
        raise ApprovalApiError(400, "must be a JSON object", "payload")
    arg = ApprovalResubmission(by, payload, note)
    return await _update(client, task_id, "resubmit", arg, timeout)


async def approval_state(
    client: Client, task_id: str, timeout: timedelta | None = None
) -> ApprovalState:
    """The live state (with the audit trail) from the workflow's ``approval`` query
    (a query needs a worker, even on a closed workflow)."""
    try:
        state = await client.get_workflow_handle(task_id).query(
            "approval",
            result_type=ApprovalState | None,  # type: ignore[arg-type]
            rpc_timeout=timeout,
        )
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            raise ApprovalApiError(404, f"no task {task_id}") from exc
        if exc.status in _NO_ANSWER:
            raise _no_answer(task_id, "approval query", timeout) from None
        raise
    if state is None:
        raise ApprovalApiError(404, f"task {task_id} is not an approval")
    return state  # type: ignore[no-any-return]
