"""Outbox rows, relay processes and the exactly-once check of a read_committed reader.

The check is the idea of Kafka's transactions system test: what went in (the outbox
rows) must equal what a ``read_committed`` consumer sees come out, with no
duplicate, and here also in the outbox's order per key.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
from aiokafka import AIOKafkaConsumer

from pipeline import kafka, settings
from pipeline.runtime import Shutdown
from tests.support import ROOT
from tests.support.process import clean_env


async def insert_rows(
    pool: asyncpg.Pool, topic: str, n: int, keys: int = 7, start: int = 0
) -> list[str]:
    """``n`` outbox rows (ids ``row-{i}``, keys ``k{i % keys}``), each in its own
    transaction as a task's would be; returns their ids."""
    from workers.store import OutboxMessage, put_outbox

    ids = [f"row-{i}" for i in range(start, start + n)]
    for i, rid in zip(range(start, start + n), ids, strict=True):
        message = OutboxMessage(
            rid, topic, f"k{i % keys}".encode(), (("task_id", rid.encode()),),
            f'{{"i": {i}}}'.encode(),
        )  # fmt: skip
        assert await put_outbox(pool, message), f"{rid} was already in the outbox"
    return ids


async def published(pool: asyncpg.Pool, instance: str) -> int:
    """Rows at or before the relay's mirrored progress (committed in Kafka)."""
    from relay import outbox
    from schemas.ids import relay_transactional_id

    async with pool.acquire() as conn:
        pos = await outbox.mirrored(conn, relay_transactional_id(instance))
    return int(
        await pool.fetchval(
            "SELECT count(*) FROM outbox WHERE (txid, seq) <= ($1::text::xid8, $2)",
            str(pos.txid),
            pos.seq,
        )
    )


async def outbox_order(pool: asyncpg.Pool) -> dict[bytes, list[str]]:
    """Per key, the row ids in the relay's publishing order ``(txid, seq)``."""
    rows = await pool.fetch("SELECT id, key FROM outbox ORDER BY txid, seq")
    per_key: dict[bytes, list[str]] = defaultdict(list)
    for r in rows:
        per_key[bytes(r["key"])].append(r["id"])
    return per_key


async def read_committed(
    bootstrap: str, topic: str, expect: int, timeout: float = 300, idle_ms: int = 2000
) -> list[Any]:
    """A read_committed reader from the start of ``topic``: until ``expect`` records came,
    or none came for 30 s (or ``timeout``), then one more idle fetch, so a record beyond
    them is seen too. Slow is not missing: the reader waits as long as records flow."""
    consumer: AIOKafkaConsumer = kafka.consumer(
        kafka.KafkaSettings(bootstrap_servers=bootstrap),
        topic,
        group_id=f"reader-{uuid.uuid4()}",
        isolation_level="read_committed",
    )
    await consumer.start()
    got: list[Any] = []
    deadline = time.monotonic() + timeout
    last = time.monotonic()
    try:
        while len(got) < expect and time.monotonic() < min(deadline, last + 30):
            for msgs in (await consumer.getmany(timeout_ms=500)).values():
                got.extend(msgs)
                last = time.monotonic()
        for msgs in (await consumer.getmany(timeout_ms=idle_ms)).values():
            got.extend(msgs)
    finally:
        await consumer.stop()
    return got


@dataclass(frozen=True)
class Verdict:
    expected: int
    seen: int
    missing: int
    duplicates: int
    unexpected: int
    out_of_order_keys: int

    def check(self) -> None:
        assert (self.missing, self.duplicates, self.unexpected, self.out_of_order_keys) == (
            0,
            0,
            0,
            0,
        ), self


def _task_id(m: Any) -> str:
    """The ``task_id`` dedupe header of a relayed record (every one carries it)."""
    raw = kafka.header(m.headers, "task_id")
    assert raw is not None, m
    return raw.decode()


def verdict(records: list[Any], order: dict[bytes, list[str]]) -> Verdict:
    """Set equality, duplicates (by the ``task_id`` dedupe header) and per-key order."""
    ids = [_task_id(m) for m in records]
    expected = {i for ids_ in order.values() for i in ids_}
    counts = Counter(ids)
    per_key: dict[bytes, list[str]] = defaultdict(list)
    for m, i in zip(records, ids, strict=True):
        per_key[m.key].append(i)
    return Verdict(
        expected=len(expected),
        seen=len(ids),
        missing=len(expected - counts.keys()),
        duplicates=sum(c - 1 for c in counts.values()),
        unexpected=len(counts.keys() - expected),
        out_of_order_keys=sum(
            1 for k, want in order.items() if list(dict.fromkeys(per_key.get(k, []))) != want
        ),
    )


def relay_env(bootstrap: str, database_url: str, instance: str, **extra: str) -> dict[str, str]:
    return clean_env(
        PYTHONPATH=str(ROOT),
        KAFKA_BOOTSTRAP_SERVERS=bootstrap,
        DATABASE_URL=database_url,
        INGEST_RELAY_INSTANCE=instance,
        INGEST_RELAY_PROGRESS_TOPIC=f"progress-{instance}",
        INGEST_RELAY_POLL_INTERVAL_MS="50",
        INGEST_RELAY_LOCK_RETRY_SECONDS="0.2",
        INGEST_METRICS_PORT="0",
        **extra,
    )


async def spawn_relay(env: dict[str, str], log: Path) -> asyncio.subprocess.Process:
    out = log.open("ab")
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "app.cli", "relay", env=env, stdout=out, stderr=out, cwd=ROOT
    )


@contextlib.asynccontextmanager
async def running_relay(cfg: settings.Settings, **kw: Any) -> AsyncIterator[Any]:
    """An in-process relay over ``cfg``'s database, with its own instance and progress
    topic (so its own transactional id); stopped (SIGTERM's path) at the end."""
    from relay.service import Relay
    from relay.settings import RelaySettings

    instance = kw.pop("instance", None) or f"t-{uuid.uuid4().hex[:10]}"
    shutdown = Shutdown()
    rcfg = RelaySettings(
        instance=instance, progress_topic=f"progress-{instance}", poll_interval_ms=50, **kw
    )
    relay = Relay(cfg, rcfg, shutdown)
    task = asyncio.create_task(relay.run())
    try:
        yield relay
    finally:
        shutdown.trigger()
        await asyncio.wait_for(task, 30)


async def diagnose(bootstrap: str, topic: str, missing: set[str]) -> dict[str, Any]:
    """Where records a read_committed reader did not see are: per partition, the last
    stable offset against the high watermark (a stuck LSO means an open transaction),
    and whether a read_uncommitted reader finds each missing id (at which offset)."""
    from aiokafka import TopicPartition

    cfg = kafka.KafkaSettings(bootstrap_servers=bootstrap)
    out: dict[str, Any] = {}
    for level in ("read_committed", "read_uncommitted"):
        c: AIOKafkaConsumer = kafka.consumer(cfg, group_id=None, isolation_level=level)
        await c.start()
        try:
            parts = sorted(c.partitions_for_topic(topic) or ())
            tps = [TopicPartition(topic, p) for p in parts]
            out[f"end_{level}"] = {tp.partition: o for tp, o in (await c.end_offsets(tps)).items()}
            if level == "read_uncommitted" and missing:
                c.assign(tps)
                await c.seek_to_beginning(*tps)
                found: dict[str, list[tuple[int, int]]] = {}
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline:
                    batch = await c.getmany(timeout_ms=1000)
                    if not batch:
                        break
                    for msgs in batch.values():
                        for m in msgs:
                            tid = (kafka.header(m.headers, "task_id") or b"").decode()
                            if tid in missing:
                                found.setdefault(tid, []).append((m.partition, m.offset))
                out["missing_found_uncommitted"] = found
        finally:
            await c.stop()
    return out
