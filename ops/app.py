"""The ops API (FastAPI) and the console page it serves.

``ops.guard`` wraps the whole app: it checks ``Host``, authenticates every ``/api``
route (a bearer token: the shared ``INGEST_OPS_TOKEN`` or a person's; or an
authenticating proxy's header, ``ops.identity``) before any body is read, refuses a
non-JSON write (415) and a body over ``INGEST_OPS_MAX_BODY_BYTES`` (413), and adds the
security headers (``ops.headers``). Who acts (a fix's ``actor``, a decision's ``by``)
comes from that identity (``GET /api/whoami``), never from the request.
Unauthenticated: ``/`` (the console page: static, it holds no data and asks for the
token), ``/auth``, ``/healthz``, ``/readyz``, the OpenAPI schema (``/openapi.json``: the
API's shape, no data) and, with ``INGEST_OPS_API_DOCS=1``, ``/docs``. Errors answer
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
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse
from pydantic import BaseModel, Field
from starlette.types import ASGIApp
from temporalio.client import Client

from ops import activity_hold, approvals, dlq, flow_release, gauges, store, tasks
from ops import headers as sec
from ops.auth import acting, identity
from ops.codec_api import MAX_BODY_BYTES as CODEC_MAX_BODY_BYTES
from ops.codec_api import configured_codec_router
from ops.errors import ApiError, BadField, NotFound
from ops.guard import FailedAuth, Guard
from ops.identity import Authenticator, Identity, load_tokens_file, parse_networks
from ops.json_caps import CappedJson
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
    WhoAmI,
    errors,
)
from ops.replay_adapter import ReplayError, ReplayRequest, run_replay
from ops.settings import OpsSettings
from pipeline.codec_keys import load_codec_settings
from pipeline.kafka import UndecodableBatch
from pipeline.settings import Settings
from schemas.status import RunStatus, TaskStatus
from schemas.workflow_io import FixRequest

Limit = Annotated[int, Query(ge=1, le=1000)]
Who = Annotated[Identity, Depends(identity)]
SWAGGER_CDN = "https://cdn.jsdelivr.net"


CODEC_PREFIX = "/codec"


@dataclass(frozen=True)
class OpsDeps:
    client: Client
    pool: asyncpg.Pool
    settings: Settings
    ops: OpsSettings


class ActionBody(BaseModel):
    actor: str | None = Field(
        None, min_length=1, max_length=200,
        description="leave out: the server records who you are (GET /api/whoami); "
        "another name answers 403",
    )  # fmt: skip
    note: str | None = Field(None, max_length=2000)


class FixBody(ActionBody):
    patch: CappedJson = Field(
        description="JSON merge patch (RFC 7396) to the task payload (at most 256 KiB "
        "as JSON, 32 levels deep, no NUL)"
    )


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
        responses=errors(400, 401, 403, 500),  # every route: a bad argument, the token
    )

    @api.get("/whoami", response_model=WhoAmI)
    async def whoami(who: Who) -> WhoAmI:
        """Who your credentials name: what fixes, skips, aborts and decisions record."""
        return WhoAmI(name=who.name, kind=who.kind, person=who.person)

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
    async def fix(task_id: str, body: FixBody, who: Who) -> dict[str, Any]:
        """Retry the paused task with its payload merge-patched by ``patch``."""
        actor = acting(who, body.actor, "actor")
        return await _act(task_id, "fix", FixRequest(actor, body.patch, body.note))

    @api.post("/tasks/{task_id}/skip", response_model=ActionResult, responses=acted)
    async def skip(task_id: str, body: ActionBody, who: Who) -> dict[str, Any]:
        """Mark the paused task skipped; its run goes on."""
        actor = acting(who, body.actor, "actor")
        return await _act(task_id, "skip", FixRequest(actor, None, body.note))

    @api.post("/tasks/{task_id}/abort", response_model=ActionResult, responses=acted)
    async def abort(task_id: str, body: ActionBody, who: Who) -> dict[str, Any]:
        """Fail the paused task; its run fails."""
        actor = acting(who, body.actor, "actor")
        return await _act(task_id, "abort", FixRequest(actor, None, body.note))

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


class OpsApp(FastAPI):
    """FastAPI with :class:`ops.guard.Guard` outside everything, Starlette's error
    middleware included, so even an unexpected 500 carries the security headers."""

    guard: dict[str, Any]

    def build_middleware_stack(self) -> ASGIApp:
        return Guard(super().build_middleware_stack(), **self.guard)


def authenticator(ops: OpsSettings) -> Authenticator:
    """The identities ``ops`` configures (the tokens file is read here: at start-up)."""
    people = load_tokens_file(ops.tokens_file) if ops.tokens_file is not None else []
    return Authenticator(
        ops.token.get_secret_value().strip() if ops.token is not None else None,
        ops.token_name,
        people,
        ops.identity_header,
        parse_networks(ops.trusted_proxies),
    )


def create_app(deps: OpsDeps, port: int | None = None) -> FastAPI:
    """The app; ``port`` is the one bound (the loopback ``Host`` names carry it)."""
    ops = deps.ops
    app = OpsApp(title="ingest ops", description=__doc__, docs_url=None, redoc_url=None)
    app.include_router(_api(deps))
    body_caps: dict[str, int] = {}
    # The codec server (INGEST_CODEC_KEYS set): POST /codec/encode and /codec/decode for
    # the Temporal UI and `temporal --codec-endpoint`, behind the same guard as /api.
    codec_routes = configured_codec_router(load_codec_settings())
    if codec_routes is not None:
        app.include_router(codec_routes, prefix=CODEC_PREFIX)
        body_caps[f"{CODEC_PREFIX}/"] = CODEC_MAX_BODY_BYTES
    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]
    page = (resources.files("ops") / "console.html").read_text()  # served as hashed
    csp = {"/": sec.console_csp(page)}
    public = {"/", "/auth", "/healthz", "/readyz", "/openapi.json"}
    auth = authenticator(ops)
    if ops.api_docs:
        docs_page = get_swagger_ui_html(
            openapi_url="/openapi.json", title="ingest ops: API", swagger_ui_parameters=None,
            swagger_js_url=f"{SWAGGER_CDN}/npm/swagger-ui-dist@5/swagger-ui-bundle.js",
            swagger_css_url=f"{SWAGGER_CDN}/npm/swagger-ui-dist@5/swagger-ui.css",
        ).body  # fmt: skip
        docs = bytes(docs_page).decode()
        csp["/docs"] = sec.docs_csp(docs, SWAGGER_CDN)
        public.add("/docs")

        @app.get("/docs", response_class=HTMLResponse, include_in_schema=False)
        async def api_docs() -> str:
            return docs

    app.guard = {
        "auth": auth,
        "allowed_hosts": ops.host_allowed(ops.port if port is None else port),
        "public": frozenset(public),
        "max_body": ops.max_body_bytes,
        "csp": csp,
        "failures": FailedAuth(ops.auth_failure_limit),
        "body_caps": body_caps,
    }

    @app.get("/auth", response_model=AuthInfo)
    async def auth_info() -> AuthInfo:
        """Unauthenticated: how the console signs in (a token, or a proxy's header)."""
        return AuthInfo(token_required=not auth.proxy_identity)

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
        return page

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
