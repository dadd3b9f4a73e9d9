"""One event followed through everything, read back from a real Jaeger.

A producer nobody here wrote (librdkafka, through confluent-kafka) sends one event with
a W3C ``traceparent``; the real pipeline processes (``ingest run``: ingress, router,
worker, relay, ops) run with ``INGEST_TRACING=1`` and export to the stack's Jaeger. The
trace Jaeger returns holds every hop, with the parent structure docs/tracing.md
describes; a redelivery of the event adds a ``route duplicate`` span to the same trace.
"""

from __future__ import annotations

import asyncio
import random
import signal
import sys
import uuid
from typing import Any

from aiokafka import AIOKafkaProducer

from schemas import ids
from tests.support import ROOT, db, kafka, wait
from tests.support.jaeger import (  # noqa: F401 (jaeger: the fixture)
    JaegerClient,
    Trace,
    jaeger,
    service_of,
    spans,
    summary,
    tags,
)
from tests.support.net import free_port_base
from tests.support.outbox import read_committed
from tests.support.process import clean_env

SERVICES = {"ingest-ingress", "ingest-router", "ingest-worker", "ingest-relay"}


def _by_name(trace: Trace) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for s in spans(trace):
        out.setdefault(s["operationName"], []).append(s)
    return out


def _parent(span: dict[str, Any]) -> str | None:
    refs = [r["spanID"] for r in span.get("references", []) if r["refType"] == "CHILD_OF"]
    return refs[0] if refs else None


def _one(trace: Trace, name: str) -> dict[str, Any]:
    found = _by_name(trace).get(name, [])
    assert len(found) == 1, f"{len(found)} spans named {name!r} in {summary(trace)}"
    return found[0]


def _complete(trace: Trace, raw: str, events: str) -> bool:
    names = _by_name(trace)
    have = {service_of(trace, s) for s in spans(trace)}
    return (
        {"ingest-ingress", "ingest-router", "ingest-worker"} <= have
        and f"process {raw}" in names
        and f"process {events}" in names
        and "route started" in names
        # start_run, then one activity per task (noop, emit)
        and sum(s["operationName"].startswith("RunActivity:") for s in spans(trace)) >= 3
    )


async def test_one_event_traced_from_its_producer_to_the_relay(
    cfg,
    topics,
    db_pool,
    jaeger: JaegerClient,  # noqa: F811 (the fixture)
):
    tag = uuid.uuid4().hex[:8]
    etype = f"traced.{tag}"
    aid = await db.seed_activity(
        db_pool, etype, tasks=[{"type": "noop"}, {"type": "emit", "config": {"topic": topics.out}}]
    )
    trace_id = random.getrandbits(128) | 1
    producer_span = random.getrandbits(64) | 1
    traceparent = f"00-{trace_id:032x}-{producer_span:016x}-01"
    bootstrap = cfg.kafka.bootstrap_servers
    kafka.produce_librdkafka(
        bootstrap,
        topics.raw,
        [db.event(etype, order_id=f"o-{tag}")],
        "none",
        headers=[("traceparent", traceparent.encode())],
    )
    event_id = ids.source_event_id(topics.raw, 0, 0)
    workflow_id = ids.event_workflow_id(aid, event_id)

    base = free_port_base([0, 1, 2, 3, 4])
    env = clean_env(
        KAFKA_BOOTSTRAP_SERVERS=bootstrap,
        KAFKA_RAW_TOPIC=topics.raw,
        KAFKA_EVENTS_TOPIC=topics.events,
        KAFKA_DLQ_TOPIC=topics.dlq,
        TEMPORAL_ADDRESS=cfg.temporal.address,
        TEMPORAL_NAMESPACE=cfg.temporal.namespace,
        TEMPORAL_TASK_QUEUE=cfg.temporal.task_queue,
        DATABASE_URL=cfg.database.url.get_secret_value(),
        INGEST_OPS_PORT="0",
        INGEST_TRACING="1",
        OTEL_EXPORTER_OTLP_ENDPOINT=jaeger.otlp_endpoint,
        OTEL_BSP_SCHEDULE_DELAY="200",
    )
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "app.cli", "run", "--base-metrics-port", str(base),
        cwd=ROOT, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    output: list[bytes] = []

    async def pump() -> None:
        assert proc.stdout is not None
        while line := await proc.stdout.readline():
            output.append(line)

    pumping = asyncio.create_task(pump())
    try:

        async def finished() -> bool:
            if proc.returncode is not None:
                raise AssertionError(b"".join(output[-40:]).decode(errors="replace"))
            status = await db_pool.fetchval(
                "SELECT status FROM activity_runs WHERE workflow_id = $1", workflow_id
            )
            return bool(status == "succeeded")

        await wait.eventually(finished, 120, "the traced event's run to succeed")
        hex_id = f"{trace_id:032x}"
        trace = await asyncio.to_thread(
            jaeger.wait_trace, hex_id, lambda t: _complete(t, topics.raw, topics.events), 60
        )
        ingress = _one(trace, f"process {topics.raw}")
        router = _one(trace, f"process {topics.events}")
        route = _one(trace, "route started")
        assert service_of(trace, ingress) == "ingest-ingress"
        assert _parent(ingress) == f"{producer_span:016x}", "a child of the producer's span"
        assert tags(ingress)["ingest.event_id"] == event_id
        assert service_of(trace, router) == "ingest-router"
        assert _parent(router) == ingress["spanID"]
        assert _parent(route) == router["spanID"]
        assert tags(route)["ingest.workflow_id"] == workflow_id
        assert tags(route)["ingest.activity_id"] == aid
        start = _one(trace, "StartWorkflow:RunActivityWorkflow")
        assert _parent(start) == route["spanID"]
        run = _one(trace, "RunWorkflow:RunActivityWorkflow")
        assert service_of(trace, run) == "ingest-worker"
        assert _parent(run) == start["spanID"]
        run_row = await db_pool.fetchval(
            "SELECT trace_id FROM activity_runs WHERE workflow_id = $1", workflow_id
        )
        assert run_row == hex_id, "the run's row names its trace (the console links it)"

        # The record the emit task published through the relay carries the trace too.
        emitted = await read_committed(bootstrap, topics.out, 1, timeout=60)
        assert len(emitted) == 1
        relayed = dict(emitted[0].headers)["traceparent"].decode()
        assert relayed.split("-")[1] == hex_id, "the relay's record joins the trace"
        trace = await asyncio.to_thread(
            jaeger.wait_trace,
            hex_id,
            lambda t: any(s["operationName"].startswith("publish ") for s in spans(t)),
            60,
        )
        publish = next(s for s in spans(trace) if s["operationName"].startswith("publish "))
        assert service_of(trace, publish) == "ingest-relay"
        assert SERVICES <= {service_of(trace, s) for s in spans(trace)}

        # A redelivery of the stamped event: a `route duplicate` span in the same trace.
        (stamped,) = await kafka.read_all(bootstrap, topics.events)
        again = AIOKafkaProducer(bootstrap_servers=bootstrap)
        await again.start()
        try:
            await again.send_and_wait(
                topics.events, stamped.value, key=stamped.key, headers=list(stamped.headers)
            )
        finally:
            await again.stop()
        trace = await asyncio.to_thread(
            jaeger.wait_trace, hex_id, lambda t: "route duplicate" in _by_name(t), 60
        )
        duplicate = _one(trace, "route duplicate")
        assert tags(duplicate)["ingest.duplicate_layer"] == "ledger"
        assert tags(duplicate)["ingest.workflow_id"] == workflow_id

        # An operator's replay of the events topic: its messages' spans join the event's
        # trace, each linked to the replay session's own span (a trace of its own).
        replay = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "app.cli", "replay", "--topic", topics.events,
            "--from-offset", "0", "--json",
            cwd=ROOT, env={**env, "INGEST_METRICS_PORT": "0"},
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        )  # fmt: skip
        said, _ = await asyncio.wait_for(replay.communicate(), 120)
        assert replay.returncode == 0, said.decode(errors="replace")

        def replayed(t: Trace) -> list[dict[str, Any]]:
            return [
                s
                for s in _by_name(t).get(f"process {topics.events}", [])
                if any(r["refType"] == "FOLLOWS_FROM" for r in s.get("references", []))
            ]

        trace = await asyncio.to_thread(jaeger.wait_trace, hex_id, lambda t: bool(replayed(t)), 60)
        link = next(r for r in replayed(trace)[0]["references"] if r["refType"] == "FOLLOWS_FROM")
        assert link["traceID"] != hex_id, "the replay session is a trace of its own"
        session = await asyncio.to_thread(jaeger.trace, link["traceID"])
        assert [s["operationName"] for s in spans(session)] == ["replay"]
        assert service_of(session, spans(session)[0]) == "ingest-replay"

        runs = await db_pool.fetchval(
            "SELECT count(*) FROM activity_runs WHERE workflow_id = $1", workflow_id
        )
        assert runs == 1
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(proc.wait(), 60)
        await pumping
    assert code == 0, b"".join(output[-40:]).decode(errors="replace")
