"""``ingest ingress``: raw topic(s) -> stamped events topic, bad input -> DLQ."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys

from app import process_setup
from app.command import Command
from app.flags import add_flags, overrides
from pipeline import settings
from pipeline.clients import MissingTopics, Unreachable, check_kafka
from pipeline.runtime import Shutdown

_DESCRIPTION = """\
Consume the raw topic(s), give every event a stable event_id, and produce it as
JSON to the events topic keyed by that event_id (all redeliveries of one event
land on one partition). Malformed input goes to the DLQ topic byte-for-byte with
dlq_reason/dlq_detail/dlq_source_* headers. Raw offsets are committed only after
Kafka acknowledged every record of the batch; SIGTERM drains, commits, exits 0.
With --transactional the records and the offsets commit in one Kafka transaction
per raw partition instead (exactly once for read_committed readers).

Every flag has an environment variable; the flag wins."""


async def _main(args: argparse.Namespace) -> int:
    from ingress.service import run_ingress
    from ingress.settings import load_ingress_settings

    cfg = settings.load_settings(
        "ingress",
        **overrides(args, "raw_topic", "events_topic", "dlq_topic", "metrics_port"),
    )
    icfg = load_ingress_settings(
        group=args.group,
        strategy=args.strategy,
        max_event_bytes=args.max_event_bytes,
        transactional=args.transactional,
        transaction_records=args.transaction_records,
    )
    process_setup.setup(cfg, "ingress")
    # aiokafka logs each failed connection attempt; at start-up one line that
    # names the setting to fix says it better.
    kafka_log = logging.getLogger("aiokafka")
    level = kafka_log.level
    kafka_log.setLevel(logging.CRITICAL)
    try:
        existing = set(await check_kafka(cfg.kafka))
    except Unreachable as exc:
        print(f"ingest ingress: {exc}", file=sys.stderr)
        return 1
    finally:
        kafka_log.setLevel(level)
    wanted = [*cfg.kafka.raw_topic.split(","), cfg.kafka.events_topic, cfg.kafka.dlq_topic]
    missing = [t.strip() for t in wanted if t.strip() and t.strip() not in existing]
    if missing and cfg.kafka.create_topics == "check":
        raise MissingTopics(missing)  # managed clusters: the topics are made elsewhere
    if missing:
        logging.getLogger("ingress").warning(
            "topics not found on the broker (run `ingest stack up` or create them): %s",
            ", ".join(missing),
        )
    shutdown = Shutdown()
    shutdown.install()
    return await run_ingress(cfg, shutdown, config=icfg)


def _run(args: argparse.Namespace) -> int:
    return asyncio.run(_main(args))


def _flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--strategy",
        metavar="{source,content,header:NAME}",
        help=(
            "how to stamp an event that has no id (env INGEST_INGRESS_STRATEGY, default "
            "source): source = UUIDv5 of raw topic/partition/offset; content = UUIDv5 of "
            "key+value bytes; header:NAME = the value of Kafka header NAME (missing -> "
            "DLQ reason missing_event_id_header). Existing ids are never changed."
        ),
    )
    p.add_argument(
        "--group",
        help="consumer group on the raw topic (env INGEST_INGRESS_GROUP, default ingest-ingress)",
    )
    add_flags(
        p,
        "raw_topic",
        "events_topic",
        "dlq_topic",
        "metrics_port",
        raw_topic="topic(s) to consume, comma-separated (env KAFKA_RAW_TOPIC, default ingest.raw)",
        events_topic="where stamped events go (env KAFKA_EVENTS_TOPIC, default ingest.events)",
        dlq_topic="where malformed input goes (env KAFKA_DLQ_TOPIC, default ingest.dlq)",
        metrics_port=(
            "port for /metrics, /healthz, /readyz; 0 disables (env INGEST_METRICS_PORT, 9400)"
        ),
    )
    p.add_argument(
        "--transactional",
        action="store_true",
        default=None,
        help=(
            "exactly-once into the events topic: each raw partition's stamped events, DLQ "
            "records and offset commit in one Kafka transaction (env "
            "INGEST_INGRESS_TRANSACTIONAL, default false; readers must use read_committed)"
        ),
    )
    p.add_argument(
        "--transaction-records",
        type=int,
        help="most raw records per transaction (env INGEST_INGRESS_TRANSACTION_RECORDS, 1000)",
    )
    p.add_argument(
        "--max-event-bytes",
        type=int,
        help=(
            "messages larger than this, raw or once stamped, go to the DLQ with reason "
            "too_large (env INGEST_MAX_EVENT_BYTES, default 1000000; the router reads the "
            "same variable: a flag here must match it)"
        ),
    )


COMMAND = Command(
    "ingress",
    help="stamp raw events with a stable event_id and publish them to the events topic",
    description=_DESCRIPTION,
    run=_run,
    flags=_flags,
    preformatted=True,
)
