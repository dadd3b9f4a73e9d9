"""The exactly-once check of Kafka's own transactions system test, as an idea, for ingress.

Kafka's test copies an input topic with a transactional copier while clients and brokers
are bounced, then has a ``read_committed`` consumer compare: the input set equals the
output set, with 0 duplicates (and order kept per partition). Here the input is the raw
topic and the copier is ingress: every raw message must appear exactly once, either as its
stamped event on the events topic (``event_id`` = UUIDv5 of its raw coordinates; its
``ingress_source`` header names them) or, if malformed, as one DLQ record (its
``dlq_source_*`` headers name them).

:class:`Reader` is a ``read_committed`` consumer of the events topic and the DLQ: one runs
while the faults go on, a fresh one reads everything again at the end, and both must pass
:meth:`Seen.check`, and so must Kafka's own Java consumer reading everything at the end
(:func:`read_everything_java`). A ``read_uncommitted`` reader counts what the log holds
besides (records of aborted transactions, or, without transactions, redelivered copies):
that is what a consumer not reading committed data would see twice.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition

from pipeline.kafka import header
from tests.support.kafka import partitions, read_java

Coord = tuple[int, int]  # raw (partition, offset)


def source_of(msg: Any) -> Coord:
    """The raw coordinates an events-topic or DLQ record came from."""
    src = header(msg.headers, "ingress_source")
    if src is not None:
        _, part, off = src.decode().rsplit("/", 2)
        return int(part), int(off)
    dlq_part, dlq_off = (
        header(msg.headers, "dlq_source_partition"),
        header(msg.headers, "dlq_source_offset"),
    )
    assert dlq_part is not None and dlq_off is not None, f"record without its source: {msg.headers}"
    return int(dlq_part), int(dlq_off)


@dataclass
class Seen:
    """What one reader saw: per raw coordinate, how often, and (one events partition) in
    which order."""

    events: Counter[Coord] = field(default_factory=Counter)
    dlq: Counter[Coord] = field(default_factory=Counter)
    order: dict[int, list[Coord]] = field(default_factory=dict)  # events partition -> sources

    def add(self, topic_kind: str, msg: Any) -> None:
        src = source_of(msg)
        if topic_kind == "dlq":
            self.dlq[src] += 1
            return
        self.events[src] += 1
        self.order.setdefault(msg.partition, []).append(src)

    @property
    def total(self) -> int:
        return sum(self.events.values()) + sum(self.dlq.values())

    def figures(self, good: set[Coord], bad: set[Coord]) -> dict[str, int]:
        out = set(self.events) | set(self.dlq)
        return {
            "lost": len((good - set(self.events)) | (bad - set(self.dlq))),
            "extra": len(out - good - bad) + len(set(self.events) & bad),
            "duplicates": self.total - len(self.events) - len(self.dlq),
            "out_of_order": sum(
                sum(1 for a, b in itertools.pairwise(seq) if b <= a) for seq in self.order.values()
            ),
        }

    def check(self, good: set[Coord], bad: set[Coord], *, ordered: bool) -> None:
        f = self.figures(good, bad)
        assert f["lost"] == 0, f"{f['lost']} raw messages never came out, e.g. {_some(self, good)}"
        assert f["extra"] == 0, f"{f['extra']} records out that no raw message explains"
        assert f["duplicates"] == 0, f"{f['duplicates']} duplicates: {_dups(self)}"
        assert set(self.dlq) == bad, "a malformed message missing from the DLQ"
        if ordered:
            assert f["out_of_order"] == 0, f"{f['out_of_order']} events out of raw order"


def _some(seen: Seen, good: set[Coord]) -> list[Coord]:
    return sorted(good - set(seen.events))[:3]


def _dups(seen: Seen) -> list[Coord]:
    return [c for c, n in (seen.events + seen.dlq).items() if n > 1][:3]


class Reader:
    """A consumer of the events topic and the DLQ from the beginning, read into a :class:`Seen`."""

    def __init__(self, bootstrap: str, events: str, dlq: str, isolation: str) -> None:
        self.kinds = {events: "events", dlq: "dlq"}
        self.seen = Seen()
        self._consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            isolation_level=isolation,
        )
        self._tps: list[TopicPartition] = []

    async def start(self) -> None:
        await self._consumer.start()
        for topic in self.kinds:
            parts = await partitions(self._consumer, topic)
            self._tps += [TopicPartition(topic, p) for p in sorted(parts)]
        self._consumer.assign(self._tps)
        await self._consumer.seek_to_beginning(*self._tps)

    async def poll(self, timeout_ms: int = 500) -> None:
        for tp, msgs in (await self._consumer.getmany(timeout_ms=timeout_ms)).items():
            kind = self.kinds[tp.topic]
            for m in msgs:
                self.seen.add(kind, m)

    async def follow(self, stop: asyncio.Event) -> None:
        """Read until ``stop``, then to the end as it stands (for read_committed: the LSO)."""
        while not stop.is_set():
            await self.poll()
        await self.to_end()

    async def to_end(self) -> None:
        end = await self._consumer.end_offsets(self._tps)
        while any([await self._consumer.position(tp) < end[tp] for tp in self._tps]):
            await self.poll(1000)

    async def stop(self) -> None:
        await self._consumer.stop()


async def read_everything(bootstrap: str, events: str, dlq: str, isolation: str) -> Seen:
    reader = Reader(bootstrap, events, dlq, isolation)
    await reader.start()
    try:
        await reader.to_end()
    finally:
        await reader.stop()
    return reader.seen


async def read_everything_java(bootstrap: str, events: str, dlq: str, isolation: str) -> Seen:
    """The same, read by Kafka's own Java consumer (``tests.support.kafka.read_java``): a
    reader nobody here wrote, so a read_committed bug shared by aiokafka's producer and
    consumer side cannot pass the check unseen."""
    seen = Seen()
    for topic, kind in ((events, "events"), (dlq, "dlq")):
        for msg in await asyncio.to_thread(read_java, bootstrap, topic, isolation):
            seen.add(kind, msg)
    return seen


class OpenTransactions:
    """Whether a topic has an open transaction: a partition's high watermark (what a
    ``read_uncommitted`` reader may read) past its last stable offset (``read_committed``)."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self._hw, self._lso = (
            AIOKafkaConsumer(bootstrap_servers=bootstrap, isolation_level=iso)
            for iso in ("read_uncommitted", "read_committed")
        )
        self._tps: list[TopicPartition] = []

    async def start(self) -> None:
        for c in (self._hw, self._lso):
            await c.start()
        self._tps = [TopicPartition(self.topic, p) for p in await partitions(self._hw, self.topic)]

    async def open(self) -> bool:
        hw = await self._hw.end_offsets(self._tps)
        lso = await self._lso.end_offsets(self._tps)
        return any(lso[tp] < hw[tp] for tp in self._tps)

    async def stop(self) -> None:
        for c in (self._hw, self._lso):
            await c.stop()
