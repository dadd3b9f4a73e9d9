"""``ingest stack``: the local stack of real services, from the ``devstack`` package.

The stack is a development tool, a distribution of its own (``stack/``, installed by
``make install``), not part of the production image; there this command says so.
Its ``up`` also creates the topic ``emit`` tasks publish to by default (a worker
setting, so known here, not in the stack).
"""

from __future__ import annotations

import argparse
import sys

from app.command import Command


def _app_topics() -> list[str]:
    from workers.settings import load_worker_settings

    return [load_worker_settings().emit_topic]


def _run(args: argparse.Namespace) -> int:
    try:
        from devstack import manager
    except ModuleNotFoundError:
        print(
            "ingest stack: the local stack is not installed here (a development tool, kept"
            " out of the production image): pip install -e ./stack from a checkout",
            file=sys.stderr,
        )
        return 2
    return manager.run(
        args.action,
        args.temporal,
        args.partitions,
        args.kafka_nodes,
        _app_topics(),
        tracing=args.tracing,
        proxied=bool(args.proxied),
        # Without the flag INGEST_STACK_SECURE decides (so no keyword at all).
        **({"secure": True} if args.secure else {}),
    )


def _flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "action",
        choices=["up", "down", "status", "build"],
        help=(
            "build: build the real Temporal server and Jaeger once "
            "(INGEST_STACK_TEMPORAL_SERVER_*, INGEST_STACK_JAEGER_*)"
        ),
    )
    p.add_argument("--partitions", type=int, help="partitions for new topics (KAFKA_PARTITIONS)")
    p.add_argument(
        "--kafka-nodes",
        type=int,
        choices=range(1, 10),
        metavar="N",
        help=(
            "up: Kafka nodes (INGEST_STACK_KAFKA_NODES, default 1). N>1 starts a KRaft "
            "cluster on ports 9092, 9094, ... (controllers 9093, 9095, ...) with "
            "replication factor 3 and min.insync.replicas=2, to try broker failover "
            "(docs/kafka.md); status/down find a started cluster by themselves"
        ),
    )
    p.add_argument(
        "--temporal",
        choices=["dev", "server"],
        help=(
            "up: which Temporal (INGEST_STACK_TEMPORAL, default dev): `dev` is "
            "`temporal server start-dev`; `server` is the real server on the stack's "
            "PostgreSQL with INGEST_STACK_TEMPORAL_SHARDS shards (default 4), built once "
            "with `go install` (docs/local-stack.md); status/down find a started one by "
            "themselves"
        ),
    )
    p.add_argument(
        "--tracing",
        action="store_true",
        default=None,
        help=(
            "up: Jaeger too (INGEST_STACK_TRACING), built once from source, spans in "
            "memory: OTLP gRPC 127.0.0.1:4317, HTTP :4318, query API and page :16686 "
            "(INGEST_STACK_JAEGER_*_PORT); a Temporal it starts exports its own spans "
            "to it; status/down find a started one by themselves"
        ),
    )
    p.add_argument(
        "--secure",
        action="store_true",
        default=None,
        help=(
            "up: the secured servers too (INGEST_STACK_SECURE), certificates from a CA "
            "the stack makes: Kafka's TLS listeners SCRAM-SHA-512 :9192, mTLS :9193 and "
            "OAUTHBEARER :9194 beside PLAINTEXT (a broker running without them is "
            "restarted), and a TLS-only PostgreSQL on :55433 (Debian's server); prints "
            "the KAFKA_* and DATABASE_URL values each needs (docs/local-stack.md)"
        ),
    )
    p.add_argument(
        "--proxied",
        action="store_true",
        help=(
            "build: Toxiproxy too (INGEST_STACK_TOXIPROXY_*), the TCP proxy that network-"
            "fault tests put in front of a service (docs/local-stack.md)"
        ),
    )


COMMAND = Command(
    "stack",
    help="start/stop/check the local Kafka, Temporal and PostgreSQL (and Jaeger)",
    description=(
        "The local stack of real services: a KRaft Kafka broker run on Java 17 from "
        "Maven jars, `temporal server start-dev` (SQLite in WAL mode) or, with "
        "--temporal server, the real Temporal server on PostgreSQL, and the "
        "embedded PostgreSQL (or DATABASE_URL if set); with --tracing, Jaeger for "
        "traces. State and logs live in INGEST_STACK_DIR (default .stack/)."
    ),
    run=_run,
    flags=_flags,
)
