"""Producing the fuzzed records with librdkafka, and reading topics a round at a time.

The records are produced with confluent-kafka (librdkafka), the client most producers
outside Python use, not with the aiokafka this project is built on (DESIGN.md
convention 12: what producers send is decided by a client nobody here wrote). What
the broker then holds is read back with aiokafka, as ingress reads it: that, not what
was generated, is the record the invariant is about and the one a violation prints.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition

from tests.fuzz.strategies import FuzzRecord
from tests.support import kafka


@dataclass(frozen=True)
class Produced:
    """Per record: its (partition, offset), or why the client or broker refused it."""

    coords: list[tuple[int, int] | None]
    refused: dict[int, str]


def produce(bootstrap: str, topic: str, records: list[FuzzRecord]) -> Produced:
    """Produce ``records`` with librdkafka (idempotent, ``acks=all``); blocking."""
    from confluent_kafka import KafkaException, Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 20,
            "compression.type": "none",
            # The broker decides what it takes (its message.max.bytes, ~1 MiB), not us.
            "message.max.bytes": 4 * 1024 * 1024,
        }
    )
    coords: list[tuple[int, int] | None] = [None] * len(records)
    refused: dict[int, str] = {}

    def delivered(i: int) -> Any:
        def cb(err: Any, msg: Any) -> None:
            if err is not None:
                refused[i] = f"broker: {err}"
            else:
                coords[i] = (msg.partition(), msg.offset())

        return cb

    for i, rec in enumerate(records):
        while True:
            try:
                producer.produce(
                    topic,
                    value=rec.value,
                    key=rec.key,
                    headers=list(rec.headers) or None,  # type: ignore[arg-type]
                    on_delivery=delivered(i),
                )
                break
            except BufferError:
                producer.poll(0.2)
            except (KafkaException, ValueError, TypeError) as exc:
                refused[i] = f"client: {exc}"
                break
        producer.poll(0)
    left = producer.flush(120)
    assert left == 0, f"librdkafka: {left} records never delivered"
    return Produced(coords, refused)


class TopicReader:
    """Reads a topic from where it last stopped up to its end offsets of the moment."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self.consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            max_partition_fetch_bytes=4 * 1024 * 1024,
        )
        self.tps: list[TopicPartition] = []

    async def start(self) -> TopicReader:
        await self.consumer.start()
        await asyncio.sleep(0.05)  # aiokafka: see tests.support.kafka._started
        parts = await kafka.partitions(self.consumer, self.topic)
        self.tps = [TopicPartition(self.topic, p) for p in sorted(parts)]
        self.consumer.assign(self.tps)
        await self.consumer.seek_to_beginning(*self.tps)
        return self

    async def stop(self) -> None:
        await self.consumer.stop()

    async def read_new(self) -> list[Any]:
        end = await self.consumer.end_offsets(self.tps)
        out: list[Any] = []

        async def behind() -> bool:
            return any([await self.consumer.position(tp) < end[tp] for tp in self.tps])

        while await behind():
            for msgs in (await self.consumer.getmany(timeout_ms=1000)).values():
                out.extend(m for m in msgs if m.offset < end[TopicPartition(m.topic, m.partition)])
        # A message beyond the end we took is read again next time.
        for tp in self.tps:
            if await self.consumer.position(tp) > end[tp]:
                self.consumer.seek(tp, end[tp])
        return out
