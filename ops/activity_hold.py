"""Pausing an activity from the ops API (``ingest activities pause|resume``, the same
code: :mod:`definitions.pause`, :func:`scheduler.sync.ensure_one`).

* ``GET /api/activities``: every activity with its pause and its held runs.
* ``POST /api/activities/{activity}/pause`` ``{"actor", "reason"}``: idempotent; a
  second pause keeps the first one's time and actor (``changed: false``).
* ``POST /api/activities/{activity}/resume`` ``{"actor", "skip_held"}``: clears the
  pause, then wakes the held runs oldest trigger first (or records them skipped).

``{activity}`` is the id or the name. Who acts is the request's identity
(``ops.auth.acting``): an ``actor`` naming anyone else answers 403.
A cron activity's schedule follows the pause; when Temporal does not answer the pause
is still recorded (the worker holds the runs) and the answer says ``schedule: null``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Protocol

import asyncpg
from fastapi import APIRouter, Depends
from pydantic import BaseModel, Field
from temporalio.client import Client

from definitions import pause
from ops.auth import acting, identity
from ops.errors import NotFound, Unavailable, no_answer
from ops.identity import Identity
from ops.models import errors
from pipeline.settings import Settings


class Deps(Protocol):  # ops.app.OpsDeps
    @property
    def client(self) -> Client: ...
    @property
    def pool(self) -> asyncpg.Pool: ...
    @property
    def settings(self) -> Settings: ...


class PauseBody(BaseModel):
    actor: str | None = Field(
        None, min_length=1, max_length=200,
        description="leave out: the server records who you are; another name answers 403",
    )  # fmt: skip
    reason: str | None = Field(None, max_length=2000)


class ResumeBody(BaseModel):
    actor: str | None = Field(
        None, min_length=1, max_length=200,
        description="leave out: the server records who you are; another name answers 403",
    )  # fmt: skip
    skip_held: bool = Field(False, description="record the held runs skipped: no task runs")


class ActivityHold(BaseModel):
    id: str
    name: str
    paused_at: datetime | None
    paused_by: str | None
    held_runs: int


class ActivityList(BaseModel):
    activities: list[ActivityHold]


class PauseResult(BaseModel):
    activity_id: str
    changed: bool = Field(description="false: it was paused already (first pause kept)")
    paused_at: datetime
    paused_by: str
    reason: str | None
    held_runs: int
    schedule: list[str] | None = Field(description="schedule changes; null: not reached")


class ResumeResult(BaseModel):
    activity_id: str
    was_paused: bool
    held_runs: int
    resumed: int
    skipped: int
    signalled: int
    not_open: list[str] = Field(description="held runs whose workflow is no longer open")
    schedule: list[str] | None = Field(description="schedule changes; null: not reached")


async def _activity(deps: Deps, ref: str) -> pause.Activity:
    act = await pause.find(deps.pool, ref)
    if act is None:
        raise NotFound(f"no activity (or several) with id or name {ref!r}")
    return act


async def _schedule(deps: Deps, act: pause.Activity) -> list[str] | None:
    from scheduler.sync import ensure_one

    if not act.cron:
        return []
    try:
        changes = await ensure_one(
            deps.client, deps.pool, act.id, deps.settings.temporal.task_queue
        )
    except Exception as exc:
        if no_answer(exc):
            return None
        raise
    return [str(c) for c in changes]


def add_routes(api: APIRouter, deps: Deps) -> None:
    @api.get("/activities", response_model=ActivityList)
    async def list_activities() -> dict[str, Any]:
        """Every activity's pause (``ingest activities list``'s PAUSED and HELD)."""
        rows = await deps.pool.fetch("SELECT id::text AS id, name FROM activities ORDER BY name")
        states = await pause.states(deps.pool)
        out = []
        for r in rows:
            at, by, held = states.get(r["id"], (None, None, 0))
            out.append({"id": r["id"], "name": r["name"], "paused_at": at, "paused_by": by,
                        "held_runs": held})  # fmt: skip
        return {"activities": out}

    @api.post("/activities/{activity}/pause", response_model=PauseResult,
              responses=errors(404))  # fmt: skip
    async def pause_activity(
        activity: str, body: PauseBody, who: Annotated[Identity, Depends(identity)]
    ) -> dict[str, Any]:
        """Hold the activity: its new runs are recorded held and start no task."""
        actor = acting(who, body.actor, "actor")
        act = await _activity(deps, activity)
        got = await pause.pause(deps.pool, act, actor, body.reason)
        return {"activity_id": act.id, "changed": got.changed, "paused_at": got.paused_at,
                "paused_by": got.paused_by, "reason": got.reason, "held_runs": got.held,
                "schedule": await _schedule(deps, act)}  # fmt: skip

    @api.post("/activities/{activity}/resume", response_model=ResumeResult,
              responses=errors(404, 503))  # fmt: skip
    async def resume_activity(
        activity: str, body: ResumeBody, who: Annotated[Identity, Depends(identity)]
    ) -> dict[str, Any]:
        """Clear the pause; wake the held runs oldest trigger first (or skip them)."""
        actor = acting(who, body.actor, "actor")
        act = await _activity(deps, activity)
        got = await pause.resume(deps.pool, act, actor, skip_held=body.skip_held)
        schedule = await _schedule(deps, act)
        try:
            sent, gone = await pause.signal_held(deps.client, got.skipped + got.held)
        except Exception as exc:
            if no_answer(exc):
                raise Unavailable(
                    "resumed, but Temporal did not answer: the held runs go on at their"
                    " next check (within 15 min), or resume again"
                ) from None
            raise
        return {"activity_id": act.id, "was_paused": got.was_paused,
                "held_runs": len(got.held) + len(got.skipped), "resumed": len(got.held),
                "skipped": len(got.skipped), "signalled": sent, "not_open": gone,
                "schedule": schedule}  # fmt: skip
