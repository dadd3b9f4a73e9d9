"""Approval routes of the ops API (issue: approvals), on ``workers.approvals.api``.

* ``GET /api/approvals?status=waiting&approver=&limit=``: from the ``approvals`` table,
  soonest deadline first; ``waiting`` includes escalated ones; with ``approver``, what
  that person may decide now (a listed approver, or the escalation contact once
  escalated). Other statuses: ``changes_requested``, ``open``, ``closed``.
* ``GET /api/approvals/{task_id}``: the live state and audit trail (the workflow query).
* ``POST /api/tasks/{task_id}/decision`` ``{"decision", "reason"}``: the ``decide``
  Workflow Update; answers once the decision is in the audit trail. 400 names the bad
  field, 403 a person who may not decide (``by``), 404 an unknown task or one that is
  not an approval, 409 a closed task or one waiting for a resubmission.
* ``POST /api/tasks/{task_id}/resubmission`` ``{"payload", "note"}``: after
  ``request_changes``.

The decider (``by``) is the request's identity (``ops.identity``): a person's token or
an authenticating proxy's header. A ``by`` in the body may only repeat it (another name
answers 403, ``ops.auth.acting``), and the shared ``INGEST_OPS_TOKEN`` names no person,
so it decides nothing (403). The workflow's validator then checks the name against the
task's approvers. Direct access to the Temporal namespace bypasses all of this.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Annotated, Any, NoReturn, Protocol

import asyncpg
from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel, Field
from temporalio.client import Client

from ops.auth import acting, identity
from ops.errors import BadField, Conflict, Forbidden, NotFound, Unavailable
from ops.identity import Identity
from ops.json_caps import CappedObject
from ops.models import ApprovalDetail, ApprovalList, UpdateResult, errors
from ops.settings import OpsSettings
from schemas.approval_io import ApprovalUpdateResult
from workers.approvals import api as approvals
from workers.approvals.api import ApprovalApiError


class Deps(Protocol):  # ops.app.OpsDeps
    @property
    def client(self) -> Client: ...
    @property
    def pool(self) -> asyncpg.Pool: ...
    @property
    def ops(self) -> OpsSettings: ...


Who = Annotated[Identity, Depends(identity)]
BY = "leave out: you decide as who your credentials name (GET /api/whoami); another name: 403"


class DecisionBody(BaseModel):
    by: str | None = Field(None, min_length=1, max_length=200, description=BY)
    decision: str = Field(description="approve | reject | request_changes")
    reason: str | None = Field(None, max_length=2000, description="required unless approving")


class ResubmissionBody(BaseModel):
    by: str | None = Field(None, min_length=1, max_length=200, description=BY)
    payload: CappedObject = Field(
        description="the new payload (at most 256 KiB as JSON, 32 levels deep, no NUL)"
    )
    note: str | None = Field(None, max_length=2000)


def _raise(exc: ApprovalApiError) -> NoReturn:
    if exc.status == 400:
        raise BadField(exc.field or "body", exc.message) from None
    if exc.status == 403:
        raise Forbidden(exc.message, exc.field) from None
    if exc.status == 404:
        raise NotFound(exc.message) from None
    if exc.status == 503:
        raise Unavailable(exc.message) from None
    raise Conflict(exc.message) from None


def add_routes(api: APIRouter, deps: Deps) -> None:
    @api.get("/approvals", response_model=ApprovalList)
    async def list_approvals(
        status: str = "waiting",
        approver: str | None = None,
        limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    ) -> dict[str, Any]:
        """Approvals by status (``waiting``: waiting for a decision), soonest deadline first."""
        try:
            return {"approvals": await approvals.list_approvals(deps.pool, status, approver, limit)}
        except ApprovalApiError as exc:
            _raise(exc)

    @api.get("/approvals/{task_id}", response_model=ApprovalDetail, responses=errors(404, 503))
    async def get_approval(task_id: str) -> dict[str, Any]:
        """The approval's live state, with its audit trail."""
        try:
            state = await approvals.approval_state(deps.client, task_id, deps.ops.temporal_timeout)
            return {"approval": state}
        except ApprovalApiError as exc:
            _raise(exc)

    updated = errors(403, 404, 409, 503)

    @api.post("/tasks/{task_id}/decision", response_model=UpdateResult, responses=updated)
    async def decide(task_id: str, body: DecisionBody, who: Who) -> dict[str, Any]:
        """Approve, reject or request changes (``reason`` required unless approving)."""
        by = _decider(who, body.by)
        return await _answer(
            approvals.send_decision(
                deps.client, task_id, by, body.decision, body.reason, deps.ops.temporal_timeout
            )
        )

    @api.post("/tasks/{task_id}/resubmission", response_model=UpdateResult, responses=updated)
    async def resubmit(task_id: str, body: ResubmissionBody, who: Who) -> dict[str, Any]:
        """A new payload after ``request_changes``: a new round of the approval starts."""
        by = _decider(who, body.by)
        return await _answer(
            approvals.send_resubmission(
                deps.client, task_id, by, body.payload, body.note, deps.ops.temporal_timeout
            )
        )


def _decider(who: Identity, given: str | None) -> str:
    by = acting(who, given, "by")
    if not who.person:
        raise Forbidden(
            f"{who.name!r} is the shared INGEST_OPS_TOKEN: it names no person, so it "
            "decides no approval; use your own token (INGEST_OPS_TOKENS_FILE) or sign in "
            "through the identity proxy",
            "by",
        )
    return by


async def _answer(update: Awaitable[ApprovalUpdateResult]) -> dict[str, Any]:
    try:
        r = await update
    except ApprovalApiError as exc:
        _raise(exc)
    return {"task_id": r.task_id, "status": r.status, "seq": r.seq}
