"""Releasing a flow.ordered line from the ops API (``ingest flow release``, the same
code: :func:`router.flow.order.release`).

* ``POST /api/flow/{activity}/release`` ``{"actor", "key"}`` or ``{"actor",
  "workflow_id"}``: close the head of the key's line (a failed run holding it), or the
  place of one run, recorded ``released`` by the request's identity (``actor`` may only
  repeat it: ``ops.auth.acting``); then wake the run whose turn it
  is now. The released run itself is not touched.

``{activity}`` is the id or the name. 404: no such activity, or no open place to
release. A wake Temporal does not take (the next run not started yet, or closed) is
no error: that run finds its turn on its own within 30 s (``woken: false``).
"""

from __future__ import annotations

from typing import Annotated, Any, Protocol

import asyncpg
from fastapi import APIRouter, Depends
from pydantic import BaseModel, Field, model_validator
from temporalio.client import Client

from definitions import pause
from ops.auth import acting, identity
from ops.errors import NotFound
from ops.identity import Identity
from ops.models import errors
from router.flow.order import NothingToRelease, release


class Deps(Protocol):  # ops.app.OpsDeps
    @property
    def client(self) -> Client: ...
    @property
    def pool(self) -> asyncpg.Pool: ...


class ReleaseBody(BaseModel):
    actor: str | None = Field(
        None, min_length=1, max_length=200,
        description="leave out: the server records who you are; another name answers 403",
    )  # fmt: skip
    key: str | None = Field(
        None, max_length=512, description="the line's key value ('' for no key)"
    )
    workflow_id: str | None = Field(None, max_length=1000, description="one run's place")

    @model_validator(mode="after")
    def _one_of(self) -> ReleaseBody:
        if (self.key is None) == (self.workflow_id is None):
            raise ValueError("give key or workflow_id (one of them)")
        return self


class ReleaseResult(BaseModel):
    activity_id: str
    released: str = Field(description="the workflow id whose place was closed")
    run_status: str | None = Field(description="its run's status then; null: never started")
    next_workflow_id: str | None = Field(description="whose turn it is now; null: nobody")
    woken: bool = Field(description="the next run was signalled (else it asks on its own)")


def add_routes(api: APIRouter, deps: Deps) -> None:
    @api.post("/flow/{activity}/release", response_model=ReleaseResult,
              responses=errors(400, 404))  # fmt: skip
    async def release_line(
        activity: str, body: ReleaseBody, who: Annotated[Identity, Depends(identity)]
    ) -> dict[str, Any]:
        """Let a blocked ordered line go on without its head (``ingest flow release``)."""
        actor = acting(who, body.actor, "actor")
        act = await pause.find(deps.pool, activity)
        if act is None:
            raise NotFound(f"no activity (or several) with id or name {activity!r}")
        try:
            done = await release(
                deps.pool, act.id, key=body.key, workflow_id=body.workflow_id, by=actor
            )
        except NothingToRelease as exc:
            raise NotFound(str(exc)) from None
        woken = False
        if done.next_workflow_id is not None:
            try:  # its timer would ask within 30 s anyway: the signal makes it now
                await deps.client.get_workflow_handle(done.next_workflow_id).signal("flow_wake")
                woken = True
            except Exception:  # not started yet, or closed: it finds its turn itself
                woken = False
        return {"activity_id": act.id, "released": done.workflow_id,
                "run_status": done.run_status, "next_workflow_id": done.next_workflow_id,
                "woken": woken}  # fmt: skip
