"""Small real-Kafka helpers for the ingress integration tests."""

from __future__ import annotations

import asyncio
import time
import uuid

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.structs import ConsumerRecord, TopicPartition


async def produce(
    bootstrap: str, topic: str, items: list[tuple[bytes | None, bytes | None, list, int]]
) -> list[tuple[int, int]]:
    """Send (key, value, headers, partition) items; returns (partition, offset) of each."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    try:
        out = []
        for key, value, headers, partition in items:
            md = await producer.send_and_wait(
                topic, value, key=key, headers=headers, partition=partition
            )
            out.append((md.partition, md.offset))
        return out
    finally:
        await producer.stop()


async def read_all(
    bootstrap: str, topic: str, expect: int, timeout: float = 30
) -> list[ConsumerRecord]:
    """Read the topic from the beginning until ``expect`` messages (or the timeout)."""
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=f"reader-{uuid.uuid4()}",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    await consumer.start()
    got: list[ConsumerRecord] = []
    deadline = time.monotonic() + timeout
    try:
        while len(got) < expect and time.monotonic() < deadline:
            batch = await consumer.getmany(timeout_ms=500)
            for msgs in batch.values():
                got.extend(msgs)
        # linger briefly: anything beyond `expect` is a bug the test should see
        batch = await consumer.getmany(timeout_ms=1000)
        for msgs in batch.values():
            got.extend(msgs)
    finally:
        await consumer.stop()
    return got


async def committed(bootstrap: str, group: str) -> dict[TopicPartition, int]:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        offsets = await admin.list_consumer_group_offsets(group)
        return {tp: om.offset for tp, om in offsets.items() if om.offset >= 0}
    finally:
        await admin.close()


async def unfinished(bootstrap: str, group: str, topic: str) -> dict[TopicPartition, int]:
    """Partitions of ``topic`` whose committed offset is short of the end (empty ones are done)."""
    done = await committed(bootstrap, group)
    ends = await end_offsets(bootstrap, topic)
    return {tp: end for tp, end in ends.items() if end and done.get(tp) != end}


async def end_offsets(bootstrap: str, topic: str) -> dict[TopicPartition, int]:
    """End offsets by partition. Delegates to :func:`tests.helpers.end_offsets`, which waits
    for the topic's metadata and never answers with an empty map (an empty map here would
    make :func:`unfinished` report "all done" vacuously)."""
    from tests import helpers

    ends = await helpers.end_offsets(bootstrap, topic)
    return {TopicPartition(topic, p): off for p, off in ends.items()}


async def wait_until(predicate, timeout: float = 30, interval: float = 0.3) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if await predicate():
            return True
        await asyncio.sleep(interval)
    return False
