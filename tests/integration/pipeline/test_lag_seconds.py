"""``pipeline_consumer_lag_seconds`` of real ``ingest ingress`` and ``ingest router``
processes on the real Kafka, read from their /metrics.

Records are produced while the process is not running, the first of them with a
timestamp 90 s in the past (as a producer replaying or catching up writes it). The
process then fetches them but cannot commit yet (ingress: the commit-delay fault
setting; the router: a long commit interval), so the oldest uncommitted record is the
first one, and the gauge must read its real age: ``now - its timestamp``, between the
ages before and after the scrape. A gauge counting from the fetch or the process start
would read a few seconds. Once the commit lands, the gauge must read 0. A missing series
fails (``tests.support.metrics.scrape``), never reads as 0.

``test_lag_seconds_reaches_the_alert``: a real Prometheus scraping ingress with the
alert rules loaded turns ``IngestConsumerBehind`` pending for a record 10 minutes old.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
from aiokafka import AIOKafkaProducer

from tests.integration.pipeline.test_metrics_prometheus import _scraped
from tests.support import ROOT, db, kafka, metrics, wait
from tests.support.net import free_port
from tests.support.process import clean_env, router_env, spawn_router

METRIC = "pipeline_consumer_lag_seconds"
OLD = 90.0  # the first record's age when produced, seconds


async def _produce(bootstrap: str, topic: str, values: list[bytes], first_age: float) -> float:
    """Produce ``values`` to partition 0 of ``topic`` in order, the first with a timestamp
    ``first_age`` seconds old; return that timestamp (seconds since the epoch) as Kafka
    stored it."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True)
    await producer.start()
    try:
        first = await producer.send_and_wait(
            topic, values[0], partition=0, timestamp_ms=int((time.time() - first_age) * 1000)
        )
        for value in values[1:]:
            await producer.send_and_wait(topic, value, partition=0)
    finally:
        await producer.stop()
    return float(first.timestamp) / 1000


Labels = tuple[str, str, str]  # component, topic, partition


async def _scrape(port: int, labels: Labels) -> float:
    """The exposed value of the series; fails when it is missing."""
    component, topic, partition = labels
    return await metrics.scrape(port, METRIC, component=component, topic=topic, partition=partition)


async def _series(port: int, labels: Labels) -> float | None:
    """The exposed value, or None while the process is not up or has no such series."""
    try:
        return await _scrape(port, labels)
    except (AssertionError, httpx.HTTPError):
        return None


async def _check_real_age(port: int, ts0: float, labels: Labels) -> float:
    """The gauge once it exists, checked against the first record's real age around the
    scrape; returns it."""

    async def exists() -> bool:
        return await _series(port, labels) is not None

    await wait.eventually(exists, 60, f"the {METRIC}{labels} series")
    before = time.time()
    value = await _scrape(port, labels)  # fails when missing
    after = time.time()
    assert before - ts0 <= value <= after - ts0, (
        f"{METRIC}{labels} = {value}: the oldest uncommitted record is "
        f"{before - ts0:.3f}-{after - ts0:.3f} s old"
    )
    return value


async def _drops_to_zero(port: int, timeout: float, labels: Labels) -> None:
    async def zero() -> bool:
        return await _scrape(port, labels) == 0

    await wait.eventually(zero, timeout, f"{METRIC}{labels} to fall to 0 once committed")


@contextlib.asynccontextmanager
async def _ingress(cfg: Any, group: str, port: int, **extra: str) -> AsyncIterator[None]:
    """``ingest ingress`` on ``cfg``'s topics, /metrics on ``port``; SIGTERM at the end,
    which must exit 0."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "app.cli",
        "ingress",
        cwd=ROOT,
        env=clean_env(
            KAFKA_BOOTSTRAP_SERVERS=cfg.kafka.bootstrap_servers,
            KAFKA_RAW_TOPIC=cfg.kafka.raw_topic,
            KAFKA_EVENTS_TOPIC=cfg.kafka.events_topic,
            KAFKA_DLQ_TOPIC=cfg.kafka.dlq_topic,
            INGEST_INGRESS_GROUP=group,
            INGEST_METRICS_PORT=str(port),
            **extra,
        ),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    try:
        yield
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
        out, _ = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, out.decode()[-3000:]


async def test_ingress_lag_seconds_is_the_age_of_the_oldest_uncommitted_record(cfg: Any) -> None:
    bootstrap, raw = cfg.kafka.bootstrap_servers, cfg.kafka.raw_topic
    values = [db.event("lag.t", n=i) for i in range(20)]
    ts0 = await _produce(bootstrap, raw, values, OLD)  # ingress is not running yet
    group = f"lag-s-{uuid.uuid4().hex[:8]}"
    port = free_port()
    delay = 15.0
    async with _ingress(
        cfg,
        group,
        port,
        INGEST_INGRESS_FAULT_COMMIT_DELAY_SECONDS=str(delay),
        INGEST_INGRESS_LAG_INTERVAL_SECONDS="0.5",
    ):
        started = time.monotonic()
        p0 = ("ingress", raw, "0")
        first = await _check_real_age(port, ts0, p0)
        assert first >= OLD
        await asyncio.sleep(1.5)
        # Still uncommitted: the same record, one and a half seconds older.
        again = await _check_real_age(port, ts0, p0)
        assert again >= first + 1.4
        assert time.monotonic() - started < delay, "the commit came before the checks"
        # Partitions with nothing to read are caught up.
        for p in ("1", "2"):
            assert await _scrape(port, ("ingress", raw, p)) == 0
        await _drops_to_zero(port, delay + 30, p0)
        assert await kafka.caught_up(bootstrap, group, raw)


async def test_router_lag_seconds_is_the_age_of_the_oldest_uncommitted_record(cfg: Any) -> None:
    bootstrap, events = cfg.kafka.bootstrap_servers, cfg.kafka.events_topic
    tag = uuid.uuid4().hex[:8]
    # No activity subscribes to lag.t: each event is done at once, nothing is started.
    values = [db.event("lag.t", f"lag-{tag}-{i}") for i in range(20)]
    ts0 = await _produce(bootstrap, events, values, OLD)  # the router is not running yet
    group = f"lag-s-{tag}"
    port = free_port()
    interval = 20.0  # the router's first commit comes this long after its start
    proc = await spawn_router(
        router_env(cfg, group, port, INGEST_ROUTER_COMMIT_INTERVAL_MS=str(int(interval * 1000)))
    )
    try:
        started = time.monotonic()
        p0 = ("router", events, "0")
        first = await _check_real_age(port, ts0, p0)  # the lag refresh runs every 5 s
        assert first >= OLD
        assert time.monotonic() - started < interval, "the commit came before the check"
        got = await kafka.committed(bootstrap, group, events)
        assert all(v is None for v in got.values()), f"nothing should be committed yet: {got}"
        await _drops_to_zero(port, interval + 30, p0)
        assert await kafka.caught_up(bootstrap, group, events)
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
        out, _ = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, out.decode()[-3000:]


async def test_lag_seconds_reaches_the_alert(cfg: Any, tmp_path: Path) -> None:
    """``IngestConsumerBehind`` turns pending for ingress with a 10-minute-old record it
    cannot commit (its commit waits for SIGTERM), read by a real Prometheus."""
    raw = cfg.kafka.raw_topic
    async with _scraped(
        "ingress",
        tmp_path,
        KAFKA_BOOTSTRAP_SERVERS=cfg.kafka.bootstrap_servers,
        KAFKA_RAW_TOPIC=raw,
        KAFKA_EVENTS_TOPIC=cfg.kafka.events_topic,
        KAFKA_DLQ_TOPIC=cfg.kafka.dlq_topic,
        INGEST_INGRESS_GROUP=f"lag-prom-{uuid.uuid4().hex[:8]}",
        INGEST_INGRESS_FAULT_COMMIT_DELAY_SECONDS="3600",
        INGEST_INGRESS_LAG_INTERVAL_SECONDS="0.5",
    ) as prom:
        await _produce(cfg.kafka.bootstrap_servers, raw, [db.event("lag.t")], 600)
        series = f'{METRIC}{{component="ingress",topic="{raw}",partition="0"}}'

        async def pending() -> bool:
            alerts = [
                a
                for a in await prom.alerts("IngestConsumerBehind")
                if a["labels"].get("component") == "ingress"
                and a["labels"].get("topic") == raw
                and a["state"] in ("pending", "firing")
            ]
            return bool(alerts)

        if not await wait.wait_until(pending, 60, 0.5):
            seen = await prom.samples(series, "5m")
            raise AssertionError(
                f"IngestConsumerBehind never became pending; Prometheus stored {seen}"
            )
        (value,) = await prom.query(series)
        assert float(value["value"][1]) >= 600
