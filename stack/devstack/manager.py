"""``ingest stack up | down | status | build``: the local stack of real services.

The command itself (its flags and --help) is :mod:`app.commands.stack`, which calls
:func:`run`.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from devstack import secure, temporal_secure
from devstack.jaeger import Jaeger, exports_traces, pipeline_env, query_url
from devstack.kafka import Kafka
from devstack.kafka_cluster import KafkaCluster, stack_kafka
from devstack.postgres import Postgres
from devstack.postgres_tls import PostgresTls
from devstack.procs import StackError
from devstack.settings import HOST, StackSettings
from devstack.temporal import Temporal
from devstack.temporal_server import TemporalServer
from devstack.toxiproxy import Toxiproxy
from pipeline.settings import build

Services = list[
    tuple[str, Kafka | KafkaCluster | Temporal | TemporalServer | Postgres | PostgresTls | Jaeger]
]


def stack_temporal(cfg: StackSettings) -> Temporal | TemporalServer:
    """The stack's Temporal: the real server when ``INGEST_STACK_TEMPORAL=server``, or
    when this stack started one and no dev server (so ``status`` finds it whatever the
    setting says now); else the dev server."""
    server = TemporalServer(cfg)
    if cfg.temporal == "server" or (server.started_procs() and Temporal(cfg).proc.pid() is None):
        return server
    return Temporal(cfg)


def stack_jaeger(cfg: StackSettings) -> Jaeger | None:
    """Jaeger when tracing is on (``--tracing``, ``INGEST_STACK_TRACING``) or this stack
    started one (so ``status`` shows it whatever the setting says now)."""
    jaeger = Jaeger(cfg)
    return jaeger if cfg.tracing or jaeger.proc.pid() is not None else None


def stack_postgres_tls(cfg: StackSettings) -> PostgresTls | None:
    """The TLS PostgreSQL when ``--secure`` (``INGEST_STACK_SECURE``) or this stack
    started one (so ``status`` shows it whatever the setting says now)."""
    pg = PostgresTls(cfg)
    return pg if cfg.secure or pg.proc.pid() is not None else None


def _services(cfg: StackSettings, kafka_nodes: int | None = None) -> Services:
    kafka = stack_kafka(cfg, kafka_nodes)
    temporal = stack_temporal(cfg)
    jaeger = stack_jaeger(cfg)
    # Jaeger first: the real server exports its spans to it from its start.
    out: Services = [("jaeger", jaeger)] if jaeger is not None else []
    tls = stack_postgres_tls(cfg)
    last: Services = [("pg-tls", tls)] if tls is not None else []
    if isinstance(temporal, TemporalServer):  # it keeps its state in the stack's PostgreSQL
        return [*out, ("kafka", kafka), ("postgres", Postgres(cfg)), ("temporal", temporal), *last]
    return [*out, ("kafka", kafka), ("temporal", temporal), ("postgres", Postgres(cfg)), *last]


def _addresses(cfg: StackSettings, kafka_nodes: int | None = None) -> dict[str, str]:
    from pipeline.db import redact

    temporal = stack_temporal(cfg)
    out = {
        "kafka": stack_kafka(cfg, kafka_nodes).address,
        "temporal": f"{HOST}:{cfg.temporal_port}",
        "postgres": redact(Postgres(cfg).url),
        "jaeger": Jaeger(cfg).summary(),
        "pg-tls": redact(PostgresTls(cfg).url),
    }
    kafka = stack_kafka(cfg, kafka_nodes)
    if isinstance(kafka, Kafka) and (cfg.secure or secure.kafka_listening(cfg)):
        out["kafka"] += " " + secure.listeners_summary(cfg)
    if isinstance(temporal, TemporalServer):
        out["temporal"] = temporal.summary()
    elif cfg.temporal_ui:
        out["temporal"] += f" (UI http://{HOST}:{cfg.temporal_ui_port})"
    return out


def up(
    cfg: StackSettings,
    partitions: int | None = None,
    kafka_nodes: int | None = None,
    extra_topics: Sequence[str] = (),
) -> int:
    """Start what is not running, then create the pipeline's topics and ``extra_topics``."""
    import asyncio

    from pipeline import settings
    from pipeline.clients import ensure_topics

    if cfg.secure and (kafka_nodes or cfg.kafka_nodes) > 1:
        print(
            "kafka: FAILED: --secure runs on the single-node broker, not --kafka-nodes",
            file=sys.stderr,
        )
        return 1
    addrs = _addresses(cfg, kafka_nodes)
    services = _services(cfg, kafka_nodes)
    for name, svc in services:
        try:
            state = svc.ensure()
        except StackError as exc:
            print(f"{name}: FAILED: {exc}", file=sys.stderr)
            return 1
        print(f"{name:9} {state:24} {addrs[name]}")
        note = untraced_server_note(svc) if cfg.tracing and state == "already running" else None
        if note:
            print(note)
    k = settings.load_settings().kafka
    topics = [k.raw_topic, k.events_topic, k.dlq_topic, *extra_topics]
    created = asyncio.run(ensure_topics(k, topics, partitions or k.partitions))
    print(topics_line(topics, created, partitions or k.partitions))
    if "," in addrs["kafka"]:
        print(f"export KAFKA_BOOTSTRAP_SERVERS={addrs['kafka']}  # so clients know every broker")
    if any(isinstance(svc, Jaeger) for _, svc in services):
        print(traces_line(cfg))
    if cfg.secure:
        print("\n".join(secure.client_lines(cfg)))
        print("\n".join(temporal_client_lines(cfg)))
    return 0


def temporal_client_lines(cfg: StackSettings) -> list[str]:
    """Under ``--secure``: the secured real server's ``TEMPORAL_*`` variables (a fresh
    token in a file), or a note that the dev server stays plaintext."""
    if isinstance(stack_temporal(cfg), TemporalServer):
        temporal_secure.write_api_key(cfg)
        return temporal_secure.client_lines(cfg)
    return ["# Temporal: the dev server has no TLS; --temporal server runs it secured"]


def traces_line(cfg: StackSettings) -> str:
    """Where to look at traces, and how a pipeline process sends its spans there."""
    env = " ".join(f"{k}={v}" for k, v in pipeline_env(cfg).items())
    return f"{'traces':9} {query_url(cfg):24} export {env}  # for ingest run"


def untraced_server_note(svc: object) -> str | None:
    """A line when tracing is on but the running Temporal was started without it."""
    if isinstance(svc, TemporalServer):
        pids = [p.pid() for p in svc.started_procs()]
    elif isinstance(svc, Temporal):
        pids = [svc.proc.pid()]
    else:
        return None
    if all(pid is None or exports_traces(pid) for pid in pids):
        return None
    return (
        f"{'':9} note: this Temporal was started without tracing, so it sends no spans; "
        "`ingest stack down`, then `up --tracing`, to trace it too"
    )


def topics_line(topics: list[str], created: list[str], partitions: int) -> str:
    """``topics    created 2 of 4   a, b, c, d (6 partitions)``: each topic named once."""
    if not created:
        state = "already present"
    elif len(created) == len(topics):
        state = "created"
    else:
        state = f"created {len(created)} of {len(topics)}"
    return f"{'topics':9} {state:24} {', '.join(topics)} ({partitions} partitions)"


def down(cfg: StackSettings) -> int:
    # Both kinds of Temporal: the real server may run beside the dev server on other
    # ports (the test suite's real-server subset does), and both keep state elsewhere.
    # Jaeger last (listed first): the servers flush their spans as they stop.
    services: Services = [("jaeger", Jaeger(cfg)), ("kafka", stack_kafka(cfg))]
    services += [("temporal", Temporal(cfg)), ("temporal", TemporalServer(cfg))]
    services += [("postgres", Postgres(cfg)), ("pg-tls", PostgresTls(cfg))]
    for name, svc in reversed(services):
        if name == "postgres" and svc.external_url():  # type: ignore[union-attr]
            print(f"{name:9} external, left alone")
            continue
        if isinstance(svc, TemporalServer) and not svc.started_procs():
            continue  # no real server was started: one "temporal" line is enough
        stopped = svc.stop()
        if isinstance(svc, Jaeger | PostgresTls) and not stopped:
            continue  # tracing (--secure) was never on: no line
        print(f"{name:9} {'stopped' if stopped else 'not started by this stack'}")
    return 0


def status(cfg: StackSettings) -> int:
    addrs = _addresses(cfg)
    bad = 0
    for name, svc in _services(cfg):
        ok = svc.answering()
        bad += not ok
        print(f"{name:9} {'answering' if ok else 'DOWN':10} {addrs[name]}")
    return 1 if bad else 0


def run(
    action: str,
    temporal: str | None = None,
    partitions: int | None = None,
    kafka_nodes: int | None = None,
    extra_topics: Sequence[str] = (),
    tracing: bool | None = None,
    proxied: bool = False,
    secure: bool | None = None,
) -> int:
    """``ingest stack ACTION``; ``extra_topics``: the application's topics ``up`` creates too;
    ``tracing``: True starts Jaeger too (None: ``INGEST_STACK_TRACING`` decides);
    ``proxied``: ``build`` builds Toxiproxy too; ``secure``: True brings up the secured
    servers too (None: ``INGEST_STACK_SECURE`` decides)."""
    # A bad INGEST_STACK_* value: one line naming it.
    cfg = build(StackSettings, temporal=temporal, tracing=tracing or None, secure=secure or None)
    if action == "up":
        return up(cfg, partitions, kafka_nodes, extra_topics)
    if action == "down":
        return down(cfg)
    if action == "build":
        return build_server(cfg, proxied=proxied)
    return status(cfg)


def build_server(cfg: StackSettings, proxied: bool = False) -> int:
    """Build what the stack builds from source, once (a cached build is reused): the
    real Temporal server's binaries, and Jaeger (the test suite's traces need it
    whether or not ``INGEST_STACK_TRACING`` is set); with ``proxied``, Toxiproxy too."""
    try:
        bins = TemporalServer(cfg).binaries()
        print(f"{'temporal':9} {'ready':24} server {bins.version}: {bins.server.parent}")
        jaeger = Jaeger(cfg).binary()
        print(f"{'jaeger':9} {'ready':24} Jaeger {cfg.jaeger_version}: {jaeger}")
        if proxied:
            toxi = Toxiproxy(cfg).binary()
            print(f"{'toxiproxy':9} {'ready':24} Toxiproxy {cfg.toxiproxy_version}: {toxi}")
    except StackError as exc:
        print(f"build: FAILED: {exc}", file=sys.stderr)
        return 1
    return 0
