"""``ingest relay``: publish the outbox of ``emit`` tasks to Kafka, exactly once."""

from __future__ import annotations

import argparse
import asyncio
import logging

from app import process_setup
from app.command import Command
from app.flags import add_flags, overrides
from pipeline import settings
from pipeline.runtime import Shutdown, serve_http
from relay.settings import RelaySettings, load_relay_settings

log = logging.getLogger("relay")


async def run_relay(
    cfg: settings.Settings, rcfg: RelaySettings, shutdown: Shutdown | None = None
) -> int:
    from relay.service import Relay

    shutdown = shutdown or Shutdown()
    shutdown.install()
    relay = Relay(cfg, rcfg, shutdown)
    server = await serve_http(
        cfg.process.metrics_host, cfg.process.metrics_port, ready=lambda: relay.ready
    )
    try:
        await relay.run()  # ends its transaction (commit or abort) whatever ends it
    finally:
        if server is not None:
            server.close()
    return 0


def _run(args: argparse.Namespace) -> int:
    cfg = settings.load_settings(
        "relay", **overrides(args, "bootstrap_servers", "database_url", "metrics_port")
    )
    rcfg = load_relay_settings(
        instance=args.instance, progress_topic=args.progress_topic, batch_size=args.batch_size
    )
    process_setup.setup(cfg, "relay")
    return asyncio.run(run_relay(cfg, rcfg))


def _flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--instance",
        help="names this outbox; the transactional id derives from it "
        "(INGEST_RELAY_INSTANCE, default 'default'; never change it for a running outbox)",
    )
    p.add_argument(
        "--progress-topic",
        help="compacted topic of the relay's progress "
        "(INGEST_RELAY_PROGRESS_TOPIC, default ingest.outbox.progress)",
    )
    p.add_argument(
        "--batch-size", type=int, help="rows per Kafka transaction (INGEST_RELAY_BATCH_SIZE, 500)"
    )
    add_flags(
        p,
        "bootstrap_servers",
        "database_url",
        "metrics_port",
        metrics_port="/metrics port, 0=off (INGEST_METRICS_PORT, 9404)",
    )


COMMAND = Command(
    "relay",
    help="publish the outbox of emit tasks to Kafka exactly once",
    description=(
        "Publish the rows emit tasks wrote to the outbox table, in order, in Kafka "
        "transactions that also carry the relay's progress (a record on the compacted "
        "progress topic). One relay owns the outbox (a PostgreSQL advisory lock and a "
        "fenced transactional id); others stand by and take over when it dies. "
        "SIGTERM finishes the current transaction and exits 0."
    ),
    run=_run,
    flags=_flags,
)
