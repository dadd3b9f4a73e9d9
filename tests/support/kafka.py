"""Real-Kafka helpers: produce (with aiokafka, librdkafka or Kafka's Java producer), read
a topic, committed and end offsets.

Offsets are keyed by partition number. Every function that lists a topic's
partitions waits for its metadata and never answers with an empty map, so
"every partition is done" can never hold vacuously.
"""

from __future__ import annotations

import asyncio
import subprocess
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from devstack.kafka import Kafka
from devstack.settings import StackSettings

from replay.session import topic_partitions
from tests.support import ROOT

# (key, value, headers) or (key, value, headers, partition)
Message = tuple[Any, ...]

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
"""Every compression codec Kafka producers may use (``compression.type``)."""


async def produce(bootstrap: str, topic: str, messages: Sequence[Message]) -> list[tuple[int, int]]:
    """Produce messages in order (idempotent, acks=all); returns (partition, offset) of each."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True)
    await producer.start()
    try:
        futs = []
        for m in messages:
            key, value, headers = m[0], m[1], m[2]
            partition = m[3] if len(m) > 3 else None
            futs.append(
                await producer.send(topic, value, key=key, headers=headers, partition=partition)
            )
        mds = [await f for f in futs]
    finally:
        await producer.stop()
    return [(md.partition, md.offset) for md in mds]


def produce_librdkafka(
    bootstrap: str,
    topic: str,
    values: Sequence[bytes],
    compression: str,
    partition: int = 0,
    headers: Sequence[tuple[str, bytes]] = (),
) -> None:
    """Publish ``values`` to one partition with librdkafka (confluent-kafka), the client most
    producers outside Python use, with ``compression.type=compression`` and ``headers`` on
    each record; every value in one batch (a long linger), every delivery checked."""
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "compression.type": compression,
            "enable.idempotence": True,
            "linger.ms": 200,
        }
    )
    failed: list[str] = []

    def delivered(err: Any, _msg: Any) -> None:
        if err is not None:
            failed.append(str(err))

    for value in values:
        producer.produce(
            topic, value, partition=partition, headers=list(headers), on_delivery=delivered
        )
    left = producer.flush(30)
    assert left == 0 and not failed, f"librdkafka: {left} undelivered, errors {failed}"


def _java_tool(main: str) -> list[str]:
    """The command line of one of Kafka's own Java tools, on the stack's jars."""
    kafka = Kafka(StackSettings(dir=ROOT / ".stack"))
    return ["java", "-cp", f"{kafka.libs()}/*:{kafka.tools()}/*", main]


def produce_java(bootstrap: str, topic: str, values: Sequence[bytes], compression: str) -> None:
    """Publish ``values`` (one line each) with Kafka's own Java producer:
    ``org.apache.kafka.tools.ConsoleProducer`` on the stack's jars, ``--compression-codec
    compression``, ``acks=all``. Keyless records from one run share a batch (the sticky
    partitioner keeps a batch on one partition)."""
    assert all(b"\n" not in v for v in values), "ConsoleProducer reads one record per line"
    res = subprocess.run(
        [
            *_java_tool("org.apache.kafka.tools.ConsoleProducer"),
            "--bootstrap-server",
            bootstrap,
            "--topic",
            topic,
            "--compression-codec",
            compression,
            "--producer-property",
            "acks=all",
            "--producer-property",
            "linger.ms=200",
        ],
        input=b"".join(v + b"\n" for v in values),
        capture_output=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr.decode(errors="replace")[-2000:]


@dataclass(frozen=True)
class JavaRecord:
    """A record as Kafka's Java consumer saw it: the fields the exactly-once checks read
    (the value is not printed), shaped like aiokafka's ``ConsumerRecord`` for them."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    headers: tuple[tuple[str, bytes], ...]


# Separators no key or header of ours contains (str.splitlines would
# also split at \x1e, so lines are split at newlines alone).
_FIELD, _HEADER = "\x1e", "\x1f"


def read_java(
    bootstrap: str, topic: str, isolation: str = "read_committed", idle_ms: int = 8000
) -> list[JavaRecord]:
    """Every record of ``topic`` from the beginning, as Kafka's own Java consumer reads it
    (``org.apache.kafka.tools.consumer.ConsoleConsumer --isolation-level isolation``),
    until none came for ``idle_ms``: a reader nobody here wrote, for checking what an
    aiokafka reader saw. Its own fresh group, so nothing is skipped."""
    props = (
        "print.partition=true", "print.offset=true", "print.headers=true", "print.key=true",
        "print.value=false", f"key.separator={_FIELD}", f"headers.separator={_HEADER}",
    )  # fmt: skip
    res = subprocess.run(
        [
            *_java_tool("org.apache.kafka.tools.consumer.ConsoleConsumer"),
            *("--bootstrap-server", bootstrap, "--topic", topic, "--from-beginning"),
            *("--group", f"java-reader-{uuid.uuid4()}", "--isolation-level", isolation),
            *("--timeout-ms", str(idle_ms)),
            *(a for p in props for a in ("--property", p)),
        ],
        capture_output=True,
        timeout=600,
    )
    err = res.stderr.decode(errors="replace")
    # Its idle timeout ends the tool with "Processed a total of N messages"; anything
    # else (a class missing, the broker unreachable) is a failure of the check.
    assert res.returncode == 0 and "Processed a total of" in err, err[-2000:]
    # Its log (the idle timeout's "ERROR ... TimeoutException") shares stdout; the count
    # it prints on stderr checks that every record line was found among it.
    lines = res.stdout.decode().split("\n")
    records = [_java_record(topic, line) for line in lines if line.startswith("Partition:")]
    total = int(err.rsplit("Processed a total of", 1)[1].split()[0])
    assert total == len(records), (total, len(records), err[-500:])
    return records


def _java_record(topic: str, line: str) -> JavaRecord:
    part, off, hdrs, key = line.split(_FIELD, 3)
    key = key.removesuffix(_FIELD)
    headers = tuple(
        (k, v.encode())
        for k, _, v in (h.partition(":") for h in hdrs.split(_HEADER) if h != "NO_HEADERS")
    )
    return JavaRecord(
        topic,
        int(part.removeprefix("Partition:")),
        int(off.removeprefix("Offset:")),
        None if key == "null" else key.encode(),
        headers,
    )


async def _started(consumer: AIOKafkaConsumer) -> None:
    await consumer.start()
    # aiokafka 0.14: stopping a group-less consumer before its internal task has
    # run once raises CancelledError; one loop turn avoids it.
    await asyncio.sleep(0.05)


async def partitions(consumer: AIOKafkaConsumer, topic: str) -> set[int]:
    """Partitions of an existing topic (waits up to 5 s for metadata; never an empty
    answer: ReplayError names a topic that does not exist)."""
    return set(await topic_partitions(consumer, topic, tries=50))


async def read_all(bootstrap: str, topic: str, idle_ms: int = 1500) -> list[Any]:
    """Every message on ``topic`` up to the end offsets taken when it starts."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest"
    )
    await _started(consumer)
    try:
        tps = [TopicPartition(topic, p) for p in sorted(await partitions(consumer, topic))]
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


async def read_until(bootstrap: str, topic: str, expect: int, timeout: float = 30) -> list[Any]:
    """Read ``topic`` from the beginning until ``expect`` messages arrived (or ``timeout``),
    then one more fetch: a message beyond ``expect`` is a bug the caller should see."""
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=f"reader-{uuid.uuid4()}",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    return await collect(consumer, expect, timeout)


async def collect(consumer: AIOKafkaConsumer, expect: int, timeout: float) -> list[Any]:
    """Start ``consumer``, read until ``expect`` messages arrived (or ``timeout``), then
    one more fetch (a message beyond ``expect`` shows too); stop it."""
    await consumer.start()
    got: list[Any] = []
    deadline = time.monotonic() + timeout
    try:
        while len(got) < expect and time.monotonic() < deadline:
            for msgs in (await consumer.getmany(timeout_ms=500)).values():
                got.extend(msgs)
        for msgs in (await consumer.getmany(timeout_ms=1000)).values():
            got.extend(msgs)
    finally:
        await consumer.stop()
    return got


async def committed(bootstrap: str, group: str, topic: str) -> dict[int, int | None]:
    """The group's committed offset per partition of ``topic`` (None: nothing committed)."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group)
    await consumer.start()
    try:
        parts = await partitions(consumer, topic)
        return {p: await consumer.committed(TopicPartition(topic, p)) for p in sorted(parts)}
    finally:
        await consumer.stop()


async def end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    """End offset per partition of ``topic``."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap)
    await _started(consumer)
    try:
        tps = [TopicPartition(topic, p) for p in sorted(await partitions(consumer, topic))]
        return {tp.partition: off for tp, off in (await consumer.end_offsets(tps)).items()}
    finally:
        await consumer.stop()


async def count(bootstrap: str, topic: str) -> int:
    """Messages ever written to ``topic`` (the sum of its end offsets)."""
    return sum((await end_offsets(bootstrap, topic)).values())


async def unfinished(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    """Partitions whose committed offset is short of the end: {partition: end offset}."""
    done = await committed(bootstrap, group, topic)
    ends = await end_offsets(bootstrap, topic)
    return {p: end for p, end in ends.items() if end and (done.get(p) or 0) < end}


async def caught_up(bootstrap: str, group: str, topic: str) -> bool:
    """The group has committed the end offset of every partition of ``topic``."""
    return not await unfinished(bootstrap, group, topic)


async def produce_at(bootstrap: str, topic: str, items: Sequence[tuple[bytes, bytes, int]]) -> None:
    """Produce (key, value, timestamp_ms) records, for tests of time ranges."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True)
    await producer.start()
    try:
        futs = [await producer.send(topic, v, key=k, timestamp_ms=ts) for k, v, ts in items]
        for f in futs:
            await f
    finally:
        await producer.stop()
