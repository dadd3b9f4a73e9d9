"""``ingest ops``: the operator API and web console."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys

from app import process_setup
from app.command import Command
from app.flags import add_flags, overrides
from pipeline import settings
from pipeline.clients import Unreachable
from pipeline.runtime import Shutdown

_DESCRIPTION = """\
Serve the operator API and its web console (http://INGEST_OPS_HOST:INGEST_OPS_PORT/,
default 127.0.0.1:8080; the OpenAPI schema at /openapi.json, Swagger UI at /docs
with INGEST_OPS_API_DOCS=1) and /metrics, /healthz, /readyz on
INGEST_METRICS_PORT (default 9403).

Every /api endpoint requires "Authorization: Bearer <token>": the shared
INGEST_OPS_TOKEN (32 characters or more, in the environment, never on the command
line) or a person's token (INGEST_OPS_TOKENS_FILE); or an authenticating proxy's
INGEST_OPS_IDENTITY_HEADER from INGEST_OPS_TRUSTED_PROXIES. Without any of them the
service refuses to start, unless it binds to 127.0.0.1 and --insecure-local is
given: then it makes a random token for the process and prints the console URL
with it. Who acts (a fix's actor, a decision's approver) is who the credentials name.

Endpoints: GET /api/runs, GET /api/runs/{run_id}, GET /api/tasks?status=pending_fix,
POST /api/tasks/{task_id}/fix|skip|abort, GET /api/dlq (within
INGEST_OPS_DLQ_PEEK_MAX_BYTES, reading at most INGEST_OPS_DLQ_PEEK_READ_MAX_BYTES),
GET /api/dlq/{partition}/{offset} (one message's header values), POST /api/replay (dry
run unless dry_run is false). Stops cleanly on SIGTERM."""


async def _main(cfg: settings.Settings, ops: object, console_token: str | None) -> int:
    from ops.service import run_ops

    shutdown = Shutdown()
    shutdown.install()
    return await run_ops(cfg, ops, shutdown, console_token=console_token)  # type: ignore[arg-type]


_FLAGS = (
    "metrics_port",
    "temporal_address",
    "namespace",
    "task_queue",
    "database_url",
    "bootstrap_servers",
    "events_topic",
    "dlq_topic",
)


def _run(args: argparse.Namespace) -> int:
    from pydantic import SecretStr

    from ops.identity import new_local_token
    from ops.settings import load_ops_settings, startup_problem

    ops = load_ops_settings(host=args.host, port=args.port)
    # /metrics, /healthz and /readyz bind where the API binds (127.0.0.1 by default)
    # unless INGEST_METRICS_HOST says otherwise: they answer anyone who reaches them.
    metrics_host = None if os.environ.get("INGEST_METRICS_HOST") else ops.host
    cfg = settings.load_settings(
        "ops",
        process__metrics_host=metrics_host,
        **overrides(args, *_FLAGS),
    )
    problem = startup_problem(ops, args.insecure_local)
    if problem is not None:
        print(f"ingest ops: refusing to start: {problem}", file=sys.stderr)
        return 2
    console_token = None
    if args.insecure_local and ops.token is None:  # no mode without a secret
        console_token = new_local_token()
        ops = ops.model_copy(update={"token": SecretStr(console_token)})
    process_setup.setup(cfg, "ops")
    try:
        return asyncio.run(_main(cfg, ops, console_token))
    except Unreachable as exc:
        print(f"ingest ops: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:  # the API port is taken (a taken metrics port is a BindError)
        reason = exc.strerror or str(exc)
        print(
            f"ingest ops: INGEST_OPS_PORT={ops.port}: cannot listen on {ops.host}:{ops.port}: "
            f"{reason} (set INGEST_OPS_PORT to a free port)",
            file=sys.stderr,
        )
        return 2


def _flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", help="bind address (env INGEST_OPS_HOST, default 127.0.0.1)")
    p.add_argument("--port", type=int, help="API/console port (env INGEST_OPS_PORT, default 8080)")
    p.add_argument(
        "--insecure-local",
        action="store_true",
        help="without INGEST_OPS_TOKEN, make a token for this process and print the "
        "console URL with it (only when bound to 127.0.0.1; Host must be 127.0.0.1 or "
        "localhost)",
    )
    add_flags(
        p,
        *_FLAGS,
        metrics_port="/metrics port (env INGEST_METRICS_PORT, 9403)",
        task_queue="workers' task queue, for replays (TEMPORAL_TASK_QUEUE)",
        events_topic="events topic, for replays (KAFKA_EVENTS_TOPIC)",
    )


COMMAND = Command(
    "ops",
    help="serve the operator API and web console (fix/skip/abort paused tasks, DLQ, replay)",
    description=_DESCRIPTION,
    run=_run,
    flags=_flags,
    preformatted=True,
)
