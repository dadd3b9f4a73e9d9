"""``ingest worker``: run RunActivityWorkflow / TaskInstanceWorkflow and the task handlers."""

from __future__ import annotations

import argparse
import asyncio

from app import process_setup
from app.command import Command
from app.flags import add_flags, overrides
from pipeline import settings
from pipeline.clients import Unreachable
from pipeline.runtime import Shutdown

_FLAGS = (
    "task_queue",
    "temporal_address",
    "namespace",
    "database_url",
    "bootstrap_servers",
    "metrics_port",
)


async def _main(cfg: settings.Settings, wcfg: object) -> int:
    from app.parts import worker_parts
    from workers.worker import run_worker

    shutdown = Shutdown()
    shutdown.install()
    return await run_worker(
        cfg,
        shutdown,
        worker_settings=wcfg,  # type: ignore[arg-type]
        parts=worker_parts(),
    )


def _run(args: argparse.Namespace) -> int:
    from workers.handlers import load_registry
    from workers.settings import load_worker_settings

    cfg = settings.load_settings(
        "worker",
        **overrides(args, *_FLAGS),
        process__log_level=args.log_level,
    )
    wcfg = load_worker_settings(
        max_concurrent_activities=args.max_concurrent_activities,
        sdk_metrics_port=args.sdk_metrics_port,
        emit_topic=args.emit_topic,
        task_handlers=args.handlers,
    )
    load_registry(wcfg.task_handlers)  # fail fast (ConfigError, exit 2) on a bad handler list
    process_setup.setup(cfg, "worker")
    try:
        return asyncio.run(_main(cfg, wcfg))
    except Unreachable as exc:
        print(f"ingest worker: {exc}")
        return 1


def _flags(p: argparse.ArgumentParser) -> None:
    add_flags(
        p,
        *_FLAGS,
        task_queue="Temporal task queue (env TEMPORAL_TASK_QUEUE)",
        metrics_port="/metrics port, 0 = off (env INGEST_METRICS_PORT, 9402)",
    )
    p.add_argument(
        "--sdk-metrics-port",
        type=int,
        help="Temporal SDK Prometheus metrics port, 0 = off (env INGEST_SDK_METRICS_PORT)",
    )
    p.add_argument(
        "--max-concurrent-activities",
        type=int,
        help="activity slots of this worker (env INGEST_MAX_CONCURRENT_ACTIVITIES)",
    )
    p.add_argument("--emit-topic", help="default topic of emit tasks (env INGEST_EMIT_TOPIC)")
    p.add_argument("--handlers", help="extra handlers 'mod:func,mod2' (env INGEST_TASK_HANDLERS)")
    p.add_argument(
        "--log-level", choices=["DEBUG", "INFO", "WARNING", "ERROR"], help="env INGEST_LOG_LEVEL"
    )


COMMAND = Command(
    "worker",
    help="run the Temporal worker: event and cron runs, task instances, task handlers",
    description=(
        "Poll the task queue for RunActivityWorkflow, TaskInstanceWorkflow and the "
        "CronFireWorkflow schedule dispatcher: log each run once, plan its tasks, run "
        "every task once through its handler (noop, fail, "
        "emit, webhook, or your own via INGEST_TASK_HANDLERS / the "
        "'ingest.task_handlers' entry point group). Stops cleanly on SIGTERM."
    ),
    run=_run,
    flags=_flags,
)
