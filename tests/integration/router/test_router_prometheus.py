"""A real Prometheus sees the first dead letter and the first duplicate of a fresh router.

Issue 21: a labelled counter with no series until its first increment is read by
Prometheus as starting at that value, so after a restart ``increase()`` of the first
event is 0 and ``IngestDeadLetters`` never fires. Here a private Prometheus (Debian's
``prometheus`` package) scrapes a freshly started ``ingest router`` every second with
the project's alert rules loaded; after its first scrape, one event without
``event_id`` and one event sent twice reach the events topic. The alert must turn
pending (its expression is positive) and the duplicates' increase must be positive.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import uuid
from pathlib import Path
from typing import Any

from schemas import ids
from tests.support import ROOT, db, kafka, metrics, wait
from tests.support.net import free_port
from tests.support.process import clean_env
from tests.support.prometheus import Prometheus, executable, prometheus
from tests.support.temporal import exists, forget

JOB = "ingest-router"
DLQ = 'pipeline_dlq_messages_total{component="router",reason="missing_event_id"}'
DUPLICATES = 'pipeline_duplicates_suppressed_total{component="router"}'


async def _router(cfg: Any, port: int) -> asyncio.subprocess.Process:
    env = clean_env(
        KAFKA_BOOTSTRAP_SERVERS=cfg.kafka.bootstrap_servers,
        KAFKA_EVENTS_TOPIC=cfg.kafka.events_topic,
        KAFKA_DLQ_TOPIC=cfg.kafka.dlq_topic,
        TEMPORAL_ADDRESS=cfg.temporal.address,
        TEMPORAL_TASK_QUEUE=cfg.temporal.task_queue,
        DATABASE_URL=cfg.database.url.get_secret_value(),
        INGEST_ROUTER_GROUP=f"prom-{uuid.uuid4().hex[:8]}",
        INGEST_METRICS_PORT=str(port),
    )
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "pipeline.cli",
        "router",
        cwd=ROOT,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )


async def _value(prom: Prometheus, expr: str) -> float | None:
    """The single value ``expr`` evaluates to, or None when it has no result."""
    result = await prom.query(expr)
    assert len(result) <= 1, result
    return float(result[0]["value"][1]) if result else None


async def _what_prometheus_saw(prom: Prometheus) -> str:
    seen = {s: [(m, v[:5]) for m, v in await prom.samples(s, "5m")] for s in (DLQ, DUPLICATES)}
    return f"samples Prometheus stored (first 5 of each series): {seen}"


async def test_first_dead_letter_and_duplicate_after_start_reach_the_alert(
    cfg: Any, temporal: Any, db_pool: Any, tmp_path: Path
) -> None:
    executable("prometheus")  # fail (CI) or skip before starting anything
    aid = await db.seed_activity(db_pool, "prom.t")
    event_id = f"prom-{uuid.uuid4().hex[:8]}"
    port = free_port()
    router = await _router(cfg, port)
    try:
        await wait.eventually(lambda: metrics.healthy(port), 60, "the router's /metrics")
        async with prometheus(tmp_path, {JOB: port}) as prom:
            await wait.eventually(lambda: prom.scraped(JOB), 60, "Prometheus's first scrape")
            await kafka.produce(
                cfg.kafka.bootstrap_servers,
                cfg.kafka.events_topic,
                [
                    (b"no-id", db.event("prom.t"), []),  # no event_id: dead-lettered
                    (event_id.encode(), db.event("prom.t", event_id), []),
                    (event_id.encode(), db.event("prom.t", event_id), []),  # a duplicate
                ],
            )

            async def scraped_after_the_events() -> bool:
                dlq = await _value(prom, DLQ)
                dups = await _value(prom, f"sum({DUPLICATES})")
                return dlq == 1 and dups == 1

            await wait.eventually(
                scraped_after_the_events, 60, "Prometheus to scrape the dead letter and duplicates"
            )

            async def alert_and_increase() -> bool:
                alerts = [
                    a
                    for a in await prom.alerts("IngestDeadLetters")
                    if a["labels"].get("component") == "router"
                    and a["labels"].get("reason") == "missing_event_id"
                    and a["state"] in ("pending", "firing")
                ]
                increase = await _value(prom, f"sum(increase({DUPLICATES}[1h]))")
                return bool(alerts) and increase is not None and increase > 0

            # Evaluated every second: 30 s is 30 evaluations after the scrape above.
            ok = await wait.wait_until(alert_and_increase, 30, 0.5)
            assert ok, (
                "IngestDeadLetters never became pending for the router's first "
                "missing_event_id, or increase() of its first duplicates stayed 0: "
                + await _what_prometheus_saw(prom)
            )
    finally:
        if router.returncode is None:
            router.send_signal(signal.SIGTERM)
        out, _ = await asyncio.wait_for(router.communicate(), 60)
        wid = ids.event_workflow_id(aid, event_id)
        if await exists(temporal, wid):  # no worker runs it: leave no workflow behind
            await forget(temporal, [wid])
    assert router.returncode == 0, out.decode()[-2000:]
