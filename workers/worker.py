"""The worker process: one Temporal worker serving the parts it is given.

``run_worker`` takes injectable dependencies (client, pool, registry, parts) so
tests run it in-process with the production wiring; it serves /metrics,
/healthz and /readyz, and on shutdown stops polling, gives in-flight handlers
``INGEST_SHUTDOWN_GRACE_SECONDS`` to finish (then cancels them; Temporal
retries them elsewhere), and closes clients.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from datetime import timedelta

import asyncpg
from temporalio.client import Client
from temporalio.runtime import PrometheusConfig, Runtime, TelemetryConfig
from temporalio.worker import PollerBehaviorSimpleMaximum, Worker

from pipeline import kafka
from pipeline.clients import db_pool, temporal_client
from pipeline.runtime import BindError, Shutdown, serve_http
from pipeline.settings import Settings
from workers.data_errors import DataErrorInterceptor
from workers.handlers import Registry, Resources, load_registry
from workers.parts import PartDeps, PartFactory, WorkerPart, core_part
from workers.sandbox import workflow_runner
from workers.settings import WorkerSettings, load_worker_settings

log = logging.getLogger(__name__)


def sdk_runtime(settings: Settings, port: int) -> Runtime | None:
    """A Temporal runtime exporting the SDK's own metrics on ``port`` (None when 0)."""
    if port == 0:
        return None
    address = f"{settings.process.metrics_host}:{port}"
    try:
        runtime = Runtime(telemetry=TelemetryConfig(metrics=PrometheusConfig(bind_address=address)))
    except ValueError as exc:  # the SDK reports a failed bind as ValueError
        raise BindError(
            "INGEST_SDK_METRICS_PORT", settings.process.metrics_host, port, exc
        ) from None
    log.info("Temporal SDK metrics on http://%s/metrics", address)
    return runtime


def build_worker(
    client: Client, settings: Settings, worker_cfg: WorkerSettings, parts: Sequence[WorkerPart]
) -> Worker:
    """One Temporal worker registering every workflow and activity of ``parts``.

    Every activity runs behind :class:`~workers.data_errors.DataErrorInterceptor`: a
    PostgreSQL data error (SQLSTATE classes 22, 54, and 23 but for a passing conflict)
    fails it without retry, instead of a bookkeeping step retrying it for ever.
    """
    return Worker(
        client,
        task_queue=settings.temporal.task_queue,
        workflows=[wf for part in parts for wf in part.workflows],
        activities=[act for part in parts for act in part.activities],
        interceptors=[DataErrorInterceptor()],
        workflow_runner=workflow_runner(
            *(m for part in parts for m in part.passthrough),
            direct_contexts=worker_cfg.sandbox_direct_contexts,
        ),
        max_concurrent_activities=worker_cfg.max_concurrent_activities,
        max_cached_workflows=worker_cfg.max_cached_workflows,
        max_concurrent_workflow_tasks=worker_cfg.max_concurrent_workflow_tasks,
        workflow_task_poller_behavior=PollerBehaviorSimpleMaximum(worker_cfg.workflow_task_pollers),
        nonsticky_to_sticky_poll_ratio=worker_cfg.nonsticky_poll_ratio,
        graceful_shutdown_timeout=timedelta(seconds=settings.process.shutdown_grace_seconds),
    )


async def run_worker(
    settings: Settings,
    shutdown: Shutdown,
    *,
    client: Client | None = None,
    pool: asyncpg.Pool | None = None,
    registry: Registry | None = None,
    worker_settings: WorkerSettings | None = None,
    parts: Sequence[PartFactory] = (core_part,),
) -> int:
    """Run until ``shutdown`` is triggered; returns the exit code. Raises Unreachable.

    ``parts`` defaults to the runs alone; ``ingest worker`` passes
    ``app.parts.worker_parts()``.
    """
    wcfg = worker_settings or load_worker_settings()
    registry = registry or load_registry(wcfg.task_handlers)
    if client is None:
        client = await temporal_client(
            settings.temporal, runtime=sdk_runtime(settings, wcfg.sdk_metrics_port)
        )
    own_pool = pool is None
    if pool is None:
        pool = await db_pool(settings.database)
    resources = Resources(
        lambda: kafka.producer(settings.kafka), wcfg.emit_topic, secrets=wcfg.webhook_secrets()
    )
    deps = PartDeps(client, pool, settings, wcfg, registry, resources)
    built = [factory(deps) for factory in parts]
    worker = build_worker(client, settings, wcfg, built)
    running = asyncio.create_task(worker.run())
    background = [asyncio.create_task(fn()) for part in built for fn in part.background]
    server = None
    code = 0
    try:
        server = await serve_http(
            settings.process.metrics_host,
            settings.process.metrics_port,
            ready=lambda: not running.done() and not shutdown.requested,
        )
        log.info(
            "worker polling task queue %s (parts: %s; handlers: %s)",
            settings.temporal.task_queue,
            ", ".join(p.name for p in built),
            ", ".join(registry.names()),
        )
        stop = asyncio.create_task(shutdown.wait())
        await asyncio.wait({running, stop}, return_when=asyncio.FIRST_COMPLETED)
        stop.cancel()
        if running.done():  # the worker died on its own (fatal poll error)
            log.error("worker stopped: %r", running.exception())
            code = 1
    finally:
        if not running.done():
            grace = settings.process.shutdown_grace_seconds
            log.info("draining in-flight tasks (up to %ss)", grace)
            await worker.shutdown()
            with contextlib.suppress(Exception):
                await running
        for task in background:
            task.cancel()
        await asyncio.gather(*background, return_exceptions=True)
        if server is not None:
            server.close()
        await resources.close()
        if own_pool:
            await pool.close()
    log.info("worker stopped")
    return code
