"""``ingest router``: consume the events topic and start RunActivityWorkflow runs."""

from __future__ import annotations

import argparse
import asyncio
import logging

from app import process_setup
from app.command import Command
from app.flags import add_flags, overrides
from pipeline import kafka, settings
from pipeline.clients import Unreachable, routing_clients
from pipeline.runtime import Shutdown, serve_http
from router.settings import RouterSettings, load_router_settings

log = logging.getLogger("router")


async def run_router(
    cfg: settings.Settings, rcfg: RouterSettings, shutdown: Shutdown | None = None
) -> int:
    from router.service import Router, start_metrics_at_zero

    shutdown = shutdown or Shutdown()
    shutdown.install()
    try:
        client, pool = await routing_clients(cfg)
    except Unreachable as exc:
        log.error("%s", exc)
        return 1
    router = Router(cfg, rcfg, client=client, pool=pool, shutdown=shutdown)
    start_metrics_at_zero(cfg)
    server = await serve_http(
        cfg.process.metrics_host, cfg.process.metrics_port, ready=lambda: router.ready
    )
    try:
        await router.run()  # drains and commits what is done, whatever ends it
    except kafka.UndecodableBatch as exc:
        log.error("%s; exiting", exc)
        return 1
    finally:
        if server is not None:
            server.close()
        await pool.close()
    return 0


def _run(args: argparse.Namespace) -> int:
    cfg = settings.load_settings(
        "router",
        **overrides(args, "events_topic", "dlq_topic", "task_queue", "metrics_port"),
    )
    rcfg = load_router_settings(
        group=args.group,
        concurrency=args.concurrency,
        ledger=False if args.no_ledger else None,
    )
    process_setup.setup(cfg, "router")
    return asyncio.run(run_router(cfg, rcfg))


def _flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--group", help="consumer group (INGEST_ROUTER_GROUP, default ingest-router)")
    p.add_argument("--concurrency", type=int, help="concurrent starts (INGEST_ROUTER_CONCURRENCY)")
    add_flags(
        p,
        "events_topic",
        "dlq_topic",
        "task_queue",
        "metrics_port",
        events_topic="topic to consume (KAFKA_EVENTS_TOPIC)",
        metrics_port="/metrics port, 0=off (INGEST_METRICS_PORT, 9401)",
    )
    p.add_argument(
        "--no-ledger",
        action="store_true",
        help="do not consult or write the dedupe ledger (INGEST_ROUTER_LEDGER=false)",
    )


COMMAND = Command(
    "router",
    help="route stamped events to RunActivityWorkflow starts",
    description=(
        "Consume the events topic; for each event start RunActivityWorkflow with id "
        "activity-{activity_id}:{event_id} (REJECT_DUPLICATE) for every enabled activity "
        "subscribed to its type. Duplicates are absorbed (ledger, then Temporal); offsets "
        "are committed only up to the highest contiguous acknowledged offset."
    ),
    run=_run,
    flags=_flags,
)
