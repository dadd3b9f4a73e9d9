"""A real Prometheus sees the first dead letter, duplicate and message of a fresh process.

Issue 21: a labelled counter with no series until its first increment is read by
Prometheus as starting at that value, so after a restart ``increase()`` of the first
event is 0 and ``IngestDeadLetters`` never fires. Here a private Prometheus (Debian's
``prometheus`` package) scrapes a freshly started ``ingest router`` or ``ingest
ingress`` every second with the project's alert rules loaded. After its first scrape
the test sends one bad message (and, to the router, one event twice); the alert must
turn pending (its expression is positive), and ``increase()`` of the first duplicate
or consumed message must be positive.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from schemas import ids
from tests.support import ROOT, db, kafka, metrics, wait
from tests.support.net import free_port
from tests.support.process import clean_env
from tests.support.prometheus import Prometheus, executable, prometheus
from tests.support.temporal import exists, forget


@contextlib.asynccontextmanager
async def _scraped(component: str, tmp_path: Path, **env: str) -> AsyncIterator[Prometheus]:
    """``ingest {component}`` on a free metrics port, and a Prometheus that has scraped it
    once; on exit Prometheus stops, then the process (SIGTERM), which must exit 0."""
    executable("prometheus")  # fail (CI=true) or skip before starting anything
    port = free_port()
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "app.cli",
        component,
        cwd=ROOT,
        env=clean_env(INGEST_METRICS_PORT=str(port), **env),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    job = f"ingest-{component}"
    try:
        await wait.eventually(lambda: metrics.healthy(port), 60, f"the {component}'s /metrics")
        async with prometheus(tmp_path, {job: port}) as prom:
            await wait.eventually(lambda: prom.scraped(job), 60, "Prometheus's first scrape")
            yield prom
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
        out, _ = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, out.decode()[-2000:]


async def _value(prom: Prometheus, expr: str) -> float | None:
    """The single value ``expr`` evaluates to, or None when it has no result."""
    result = await prom.query(expr)
    assert len(result) <= 1, result
    return float(result[0]["value"][1]) if result else None


async def _alert_and_increase(prom: Prometheus, component: str, reason: str, counter: str) -> None:
    """Wait until ``IngestDeadLetters{component, reason}`` is pending or firing and
    ``increase(counter[1h])`` is positive; fail showing what Prometheus stored."""
    dlq = f'pipeline_dlq_messages_total{{component="{component}",reason="{reason}"}}'

    async def scraped_after_the_events() -> bool:
        return await _value(prom, dlq) == 1

    await wait.eventually(scraped_after_the_events, 60, "Prometheus to scrape the dead letter")

    async def positive() -> bool:
        alerts = [
            a
            for a in await prom.alerts("IngestDeadLetters")
            if a["labels"].get("component") == component
            and a["labels"].get("reason") == reason
            and a["state"] in ("pending", "firing")
        ]
        increase = await _value(prom, f"sum(increase({counter}[1h]))")
        return bool(alerts) and increase is not None and increase > 0

    # Rules are evaluated every second: 30 s is 30 evaluations after the scrape above.
    if not await wait.wait_until(positive, 30, 0.5):
        seen = {s: [(m, v[:5]) for m, v in await prom.samples(s, "5m")] for s in (dlq, counter)}
        raise AssertionError(
            f"IngestDeadLetters never became pending for {component}'s first {reason}, or "
            f"increase({counter}) stayed 0: the first 5 samples Prometheus stored: {seen}"
        )


async def test_router_first_dead_letter_and_duplicate_reach_the_alert(
    cfg: Any, temporal: Any, db_pool: Any, tmp_path: Path
) -> None:
    aid = await db.seed_activity(db_pool, "prom.t")
    event_id = f"prom-{uuid.uuid4().hex[:8]}"
    wid = ids.event_workflow_id(aid, event_id)
    duplicates = 'pipeline_duplicates_suppressed_total{component="router"}'
    try:
        async with _scraped(
            "router",
            tmp_path,
            KAFKA_BOOTSTRAP_SERVERS=cfg.kafka.bootstrap_servers,
            KAFKA_EVENTS_TOPIC=cfg.kafka.events_topic,
            KAFKA_DLQ_TOPIC=cfg.kafka.dlq_topic,
            TEMPORAL_ADDRESS=cfg.temporal.address,
            TEMPORAL_TASK_QUEUE=cfg.temporal.task_queue,
            DATABASE_URL=cfg.database.url.get_secret_value(),
            INGEST_ROUTER_GROUP=f"prom-{uuid.uuid4().hex[:8]}",
        ) as prom:
            await kafka.produce(
                cfg.kafka.bootstrap_servers,
                cfg.kafka.events_topic,
                [
                    (b"no-id", db.event("prom.t"), []),  # no event_id: dead-lettered
                    (event_id.encode(), db.event("prom.t", event_id), []),
                    (event_id.encode(), db.event("prom.t", event_id), []),  # a duplicate
                ],
            )
            await _alert_and_increase(prom, "router", "missing_event_id", duplicates)
    finally:
        if await exists(temporal, wid):  # no worker runs it: leave no workflow behind
            await forget(temporal, [wid])


async def test_ingress_first_dead_letter_and_message_reach_the_alert(
    cfg: Any, tmp_path: Path
) -> None:
    async with _scraped(
        "ingress",
        tmp_path,
        KAFKA_BOOTSTRAP_SERVERS=cfg.kafka.bootstrap_servers,
        KAFKA_RAW_TOPIC=cfg.kafka.raw_topic,
        KAFKA_EVENTS_TOPIC=cfg.kafka.events_topic,
        KAFKA_DLQ_TOPIC=cfg.kafka.dlq_topic,
        INGEST_INGRESS_GROUP=f"prom-{uuid.uuid4().hex[:8]}",
    ) as prom:
        await kafka.produce(cfg.kafka.bootstrap_servers, cfg.kafka.raw_topic, [(None, b"{", [])])
        consumed = 'pipeline_events_consumed_total{component="ingress"}'
        await _alert_and_increase(prom, "ingress", "not_json", consumed)
