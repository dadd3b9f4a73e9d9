"""Helpers shared by integration tests: seeding activities, producing, reading topics."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg
import orjson
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from definitions import store
from schemas.definitions import ActivityDef


async def seed_activity(
    pool: asyncpg.Pool,
    event_type: str | None = None,
    *,
    tasks: list[dict[str, Any]] | None = None,
    trigger: dict[str, Any] | None = None,
    enabled: bool = True,
    activity_id: uuid.UUID | None = None,
) -> str:
    aid = activity_id or uuid.uuid4()
    act = ActivityDef.model_validate(
        {
            "id": aid,
            "name": f"test {aid}",
            "enabled": enabled,
            "trigger": trigger or {"type": "event", "event_type": event_type},
            "tasks": tasks if tasks is not None else [{"type": "noop"}],
        }
    )
    await store.upsert(pool, [act])
    return str(aid)


async def produce(
    bootstrap: str,
    topic: str,
    messages: list[tuple[bytes | None, bytes, list[tuple[str, bytes]]]],
) -> list[tuple[int, int]]:
    """Produce (key, value, headers) in order; returns (partition, offset) of each."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True)
    await producer.start()
    try:
        futs = [
            await producer.send(topic, value, key=key, headers=headers)
            for key, value, headers in messages
        ]
        mds = [await f for f in futs]
    finally:
        await producer.stop()
    return [(m.partition, m.offset) for m in mds]


async def _partitions(consumer: AIOKafkaConsumer, topic: str) -> set[int]:
    """Partitions of an existing topic (waits for metadata; never an empty answer)."""
    for _ in range(50):
        cluster = await consumer._client.fetch_all_metadata()
        parts = cluster.partitions_for_topic(topic)
        if parts:
            return set(parts)
        await asyncio.sleep(0.1)
    raise AssertionError(f"topic {topic} has no partitions in the metadata")


async def read_all(bootstrap: str, topic: str, idle_ms: int = 1500) -> list[Any]:
    """Every message currently on ``topic`` (reads until the end offsets)."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest"
    )
    await consumer.start()
    await asyncio.sleep(0.05)  # see end_offsets
    try:
        parts = await _partitions(consumer, topic)
        tps = [TopicPartition(topic, p) for p in sorted(parts)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        end = await consumer.end_offsets(tps)
        out: list[Any] = []

        async def behind() -> bool:
            return any([await consumer.position(tp) < end[tp] for tp in tps])

        while await behind():
            batch = await consumer.getmany(timeout_ms=idle_ms)
            for msgs in batch.values():
                out.extend(msgs)
        return out
    finally:
        await consumer.stop()


async def committed(bootstrap: str, group: str, topic: str) -> dict[int, int | None]:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group)
    await consumer.start()
    try:
        parts = await _partitions(consumer, topic)
        return {p: await consumer.committed(TopicPartition(topic, p)) for p in sorted(parts)}
    finally:
        await consumer.stop()


async def end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap)
    await consumer.start()
    # aiokafka 0.14: stopping a group-less consumer before its internal task has
    # run once raises CancelledError; one loop turn avoids it.
    await asyncio.sleep(0.05)
    try:
        parts = await _partitions(consumer, topic)
        tps = [TopicPartition(topic, p) for p in sorted(parts)]
        return {tp.partition: off for tp, off in (await consumer.end_offsets(tps)).items()}
    finally:
        await consumer.stop()


async def eventually(
    check: Callable[[], Awaitable[bool]], timeout: float = 60, what: str = "condition"
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if await check():
            return
        await asyncio.sleep(0.3)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def event(event_type: str, event_id: str | None = None, **data: Any) -> bytes:
    doc: dict[str, Any] = {"type": event_type, "source": "test", "data": data}
    if event_id is not None:
        doc["event_id"] = event_id
    return orjson.dumps(doc)


def metric_value(name: str, **labels: str) -> float:
    from prometheus_client import REGISTRY

    return REGISTRY.get_sample_value(name, labels) or 0.0


async def route_until_committed(
    cfg: Any, rcfg: Any, temporal: Any, pool: asyncpg.Pool, timeout: float = 60
) -> Any:
    """Run the live Router in-process until its group has committed the end offsets."""
    from pipeline.runtime import Shutdown
    from router.service import Router

    shutdown = Shutdown()
    router = Router(cfg, rcfg, client=temporal, pool=pool, shutdown=shutdown)
    task = asyncio.create_task(router.run())
    end = await end_offsets(cfg.kafka.bootstrap_servers, cfg.kafka.events_topic)

    async def caught_up() -> bool:
        got = await committed(cfg.kafka.bootstrap_servers, rcfg.group, cfg.kafka.events_topic)
        return all((got.get(p) or 0) >= off for p, off in end.items())

    try:
        await eventually(caught_up, timeout, "router commits reaching the end offsets")
    finally:
        shutdown.trigger()
        await asyncio.wait_for(task, 30)
    return router


async def exists(client: Any, wid: str) -> bool:
    """Temporal still knows this workflow id."""
    try:
        await client.get_workflow_handle(wid).describe()
        return True
    except Exception:
        return False
