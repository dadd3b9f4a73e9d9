"""The ops API (FastAPI) and the console page it serves.

Every ``/api`` route needs ``Authorization: Bearer <INGEST_OPS_TOKEN>``
(``ops.auth``). Unauthenticated: ``/`` (the console page: static, it holds no
data and asks for the token), ``/healthz``, ``/readyz``, and the OpenAPI schema
and docs (``/openapi.json``, ``/docs``: the API's shape, no data). Errors answer
``{"detail": ..., "field": ...}`` (``ops.models.ErrorBody``): 400 names the bad field,
404 the unknown id, 409 the state that forbids the action, 503 Temporal or a worker
that did not answer in time, 500 anything unexpected (logged). Every answer's body is
a model in ``ops.models``, so the OpenAPI schema names each field.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from importlib import resources
from typing import Annotated, Any

import asyncpg
from fastapi import APIRouter, Depends, FastAPI, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse
from pydantic import BaseModel, Field
from temporalio.client import Client

from ops import activity_hold, approvals, dlq, flow_release, gauges, store, tasks
from ops.auth import TokenGuard
from ops.errors import ApiError, BadField, NotFound
from ops.models import (
    ActionResult,
    AuthInfo,
    DlqPeek,
    DlqRecord,
    ErrorBody,
    FlowState,
    PermitList,
    ReplayReport,
    RunDetail,
    RunList,
    TaskDetail,
    TaskList,
    errors,
)
from ops.replay_adapter import ReplayError, ReplayRequest, run_replay
from ops.settings import OpsSettings
from pipeline.kafka import UndecodableBatch
from pipeline.settings import Settings
from schemas.status import RunStatus, TaskStatus
from schemas.workflow_io import FixRequest

Limit = Annotated[int, Query(ge=1, le=1000)]


@dataclass(frozen=True)
class OpsDeps:
    client: Client
    pool: asyncpg.Pool
    settings: Settings
    ops: OpsSettings


class ActionBody(BaseModel):
    actor: str = Field("operator", min_length=1, max_length=200)
    note: str | None = Field(None, max_length=2000)


class FixBody(ActionBody):
    patch: Any = Field(description="JSON merge patch (RFC 7396) to the task payload")


class ReplayBody(BaseModel):
    dry_run: bool = True
    dlq: bool = False
    reason: str | None = None
    topic: str | None = None
    from_offset: int | None = Field(None, ge=0)
    from_time: datetime | None = None
    to_time: datetime | None = None
    partitions: list[int] | None = None

    def request(self) -> ReplayRequest:
        if self.dlq:
            for name in ("topic", "from_offset", "from_time", "to_time", "partitions"):
                if getattr(self, name) is not None:
                    raise BadField(name, "dlq re-drives from its group's position; drop it")
        elif self.from_offset is None and self.from_time is None:
            raise BadField("from_offset", "give from_offset or from_time (or dlq: true)")
        elif self.reason is not None:
            raise BadField("reason", "only applies with dlq: true")
        for name in ("from_time", "to_time"):
            value = getattr(self, name)
            if value is not None and value.tzinfo is None:
                raise BadField(name, "needs a time zone (e.g. Z or +00:00)")
        return ReplayRequest(
            dry_run=self.dry_run, dlq=self.dlq, reason=self.reason, topic=self.topic,
            from_offset=self.from_offset, from_time=self.from_time, to_time=self.to_time,
            partitions=tuple(self.partitions) if self.partitions is not None else None,
        )  # fmt: skip


def _api(deps: OpsDeps) -> APIRouter:
    api = APIRouter(
        prefix="/api",
        dependencies=[Depends(TokenGuard(deps.ops.token))],
        responses=errors(400, 401, 403, 500),  # every route: a bad argument, the token
    )

    def _linked(run: dict[str, Any]) -> dict[str, Any]:
        """The run with the link to its trace (``INGEST_OPS_TRACE_URL_TEMPLATE``)."""
        run["trace_url"] = deps.ops.trace_url(run.get("trace_id"))
        return run

    @api.get("/runs", response_model=RunList)
    async def list_runs(
        activity: uuid.UUID | None = None,
        status: RunStatus | None = None,
        since: datetime | None = None,
        limit: Limit = 50,
    ) -> dict[str, Any]:
        """Recent runs, newest first, with their tasks counted by status."""
        runs = await store.list_runs(deps.pool, activity, status, since, limit)
        return {"runs": [_linked(r) for r in runs]}

    @api.get("/runs/{run_id}", response_model=RunDetail, responses=errors(404, 503))
    async def get_run(run_id: uuid.UUID) -> dict[str, Any]:
        """The run, its tasks, the fixes made to them, and its Temporal status."""
        run = await store.get_run(deps.pool, run_id)
        if run is None:
            raise NotFound(f"no run {run_id}")
        return {
            "run": _linked(run),
            "temporal_status": await tasks.temporal_status(deps.client, run["workflow_id"]),
            "tasks": await store.run_tasks(deps.pool, run_id),
            "fixes": await store.fixes(deps.pool, run_id=run_id),
        }

    @api.get("/tasks", response_model=TaskList, responses=errors(503))
    async def list_tasks(
        status: str = TaskStatus.PENDING_FIX.value,
        failed_task: str | None = None,
        activity: uuid.UUID | None = None,
        limit: Limit = 100,
    ) -> dict[str, Any]:
        """pending_fix: found through Temporal visibility, joined with the database;
        any other status: from the database (``failed_task`` filters the task type)."""
        if status not in store.TASK_STATUSES:
            raise BadField("status", f"one of {', '.join(store.TASK_STATUSES)}")
        if status == TaskStatus.PENDING_FIX:
            found = await tasks.paused_tasks(deps.client, deps.pool, failed_task, activity, limit)
        else:
            found = await store.list_tasks(deps.pool, status, failed_task, activity, limit)
        return {"tasks": found}

    @api.get("/tasks/{task_id}", response_model=TaskDetail, responses=errors(404))
    async def get_task(task_id: str) -> dict[str, Any]:
        task = await store.get_task(deps.pool, task_id)
        if task is None:
            raise NotFound(f"no task {task_id}")
        return {"task": task, "fixes": await store.fixes(deps.pool, task_id=task_id)}

    async def _act(task_id: str, action: str, req: FixRequest) -> dict[str, Any]:
        timeout = deps.ops.temporal_timeout
        result = await tasks.act(deps.client, deps.pool, task_id, action, req, timeout)
        await gauges.refresh(deps.pool)
        return {"task_id": result.task_id, "action": result.action, "seq": result.seq}

    acted = errors(404, 409, 503)

    @api.post("/tasks/{task_id}/fix", response_model=ActionResult, responses=acted)
    async def fix(task_id: str, body: FixBody) -> dict[str, Any]:
        """Retry the paused task with its payload merge-patched by ``patch``."""
        return await _act(task_id, "fix", FixRequest(body.actor, body.patch, body.note))

    @api.post("/tasks/{task_id}/skip", response_model=ActionResult, responses=acted)
    async def skip(task_id: str, body: ActionBody) -> dict[str, Any]:
        """Mark the paused task skipped; its run goes on."""
        return await _act(task_id, "skip", FixRequest(body.actor, None, body.note))

    @api.post("/tasks/{task_id}/abort", response_model=ActionResult, responses=acted)
    async def abort(task_id: str, body: ActionBody) -> dict[str, Any]:
        """Fail the paused task; its run fails."""
        return await _act(task_id, "abort", FixRequest(body.actor, None, body.note))

    # Fields a message or a report does not have are left out, not null (the CLI's shape).
    @api.get("/dlq", response_model=DlqPeek, response_model_exclude_unset=True,
             responses=errors(503))  # fmt: skip
    async def peek_dlq(reason: str | None = None, limit: Limit = 50) -> dict[str, Any]:
        """The newest DLQ messages (up to ``limit`` per partition) within the byte budgets,
        header values left out; commits nothing."""
        budget = dlq.Budget(deps.ops.dlq_peek_max_bytes, deps.ops.dlq_peek_read_max_bytes)
        limit = min(limit, deps.ops.dlq_peek_max)
        return await dlq.peek(deps.settings.kafka, reason, limit, budget)

    @api.get("/dlq/{partition}/{offset}", response_model=DlqRecord,
             response_model_exclude_unset=True, responses=errors(404, 503))  # fmt: skip
    async def dlq_message(
        partition: Annotated[int, Path(ge=0)], offset: Annotated[int, Path(ge=0)]
    ) -> dict[str, Any]:
        """One DLQ message with its header values (each truncated), within the budget."""
        try:
            found = await dlq.record(
                deps.settings.kafka, partition, offset, deps.ops.dlq_peek_max_bytes
            )
        except UndecodableBatch as exc:  # a codec library missing here: say which
            raise ApiError(str(exc)) from None
        if found is None:
            topic = deps.settings.kafka.dlq_topic
            raise NotFound(f"no DLQ message at partition {partition} offset {offset} of {topic}")
        return found

    @api.post("/replay", response_model=ReplayReport, response_model_exclude_unset=True,
              responses=errors(503))  # fmt: skip
    async def replay(body: ReplayBody) -> dict[str, Any]:
        """``ingest replay`` (dry run unless ``dry_run: false``); the ``--json`` report."""
        try:
            return await run_replay(deps.settings, deps.client, deps.pool, body.request())
        except ReplayError as exc:
            raise BadField("topic", str(exc)) from None

    approvals.add_routes(api, deps)  # /api/approvals, /api/tasks/{id}/decision (ops.approvals)
    activity_hold.add_routes(api, deps)  # /api/activities, .../pause, .../resume
    flow_release.add_routes(api, deps)  # /api/flow/{activity}/release

    @api.get("/permits", response_model=PermitList, responses=errors(503))
    async def permits(resource: str | None = None) -> dict[str, Any]:
        """Every acquired permit slot: state, holder task, fencing token, age vs lease."""
        from workers.permits.report import permit_rows

        return {"permits": await permit_rows(deps.pool, deps.client, resource)}

    @api.get("/flow", response_model=FlowState, responses=errors(503))
    async def flow(activity: uuid.UUID | None = None, skips: int = 50) -> dict[str, Any]:
        """Flow control per activity and key (``ingest flow list``), and the latest skips."""
        from router.flow.listing import flow_rows
        from router.flow.skips import recent_skips

        aid = str(activity) if activity else None
        return {
            "keys": await flow_rows(deps.pool, aid),
            "skips": [s.__dict__ for s in await recent_skips(deps.pool, aid, min(skips, 500))],
        }

    return api


def create_app(deps: OpsDeps) -> FastAPI:
    app = FastAPI(title="ingest ops", description=__doc__)
    app.include_router(_api(deps))
    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]

    @app.get("/auth", response_model=AuthInfo)
    async def auth() -> AuthInfo:
        """Unauthenticated: whether the API needs a token (the console says when not)."""
        return AuthInfo(token_required=deps.ops.token is not None)

    @app.exception_handler(ApiError)
    async def _api_error(request: Request, exc: ApiError) -> JSONResponse:
        return JSONResponse(exc.body(), status_code=exc.status)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        # Starlette raises it on after this answer, and uvicorn logs its traceback.
        body = ErrorBody(detail=f"internal error ({type(exc).__name__}); see the ops log")
        return JSONResponse(body.model_dump(exclude_none=True), status_code=500)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        err = exc.errors()[0]
        loc = [str(p) for p in err.get("loc", ()) if p not in ("body", "query", "path")]
        field = ".".join(loc) or "body"
        return JSONResponse(BadField(field, err.get("msg", "invalid")).body(), status_code=400)

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    async def console() -> str:
        return (resources.files("ops") / "console.html").read_text()

    @app.get("/healthz", response_class=PlainTextResponse, include_in_schema=False)
    async def healthz() -> str:
        return "ok\n"

    @app.get("/readyz", response_class=PlainTextResponse, include_in_schema=False)
    async def readyz() -> PlainTextResponse:
        try:
            await deps.pool.fetchval("SELECT 1")
        except Exception:
            return PlainTextResponse("not ready\n", status_code=503)
        return PlainTextResponse("ready\n")

    return app


def _openapi(app: FastAPI) -> dict[str, Any]:
    """FastAPI's schema, less its 422 answers: a validation error answers 400 with an
    ``ErrorBody`` (the handler above), which every route lists."""
    if app.openapi_schema is None:
        from fastapi.openapi.utils import get_openapi

        schema = get_openapi(title=app.title, version=app.version,
                             description=app.description, routes=app.routes)  # fmt: skip
        for path in schema["paths"].values():
            for op in path.values():
                op.get("responses", {}).pop("422", None)
        for name in ("HTTPValidationError", "ValidationError"):
            schema.get("components", {}).get("schemas", {}).pop(name, None)
        app.openapi_schema = schema
    return app.openapi_schema
