"""``ingest replay --dlq``: re-drive dead letters through the same validation, once.

Ingress rejections (``dlq_component=ingress``) go back through ingress's own
transform (injected as ``restamp``, e.g. :func:`ingress.records.restamper`) on a
copy of the record rebuilt from its ``dlq_source_*`` coordinates, so the event
id is the one the first attempt would have stamped. Everything else goes back
through the router's :class:`Routing`, except the relay's (``dlq_component=relay``:
an emit's message, not an event), which are carried forward unchanged. Still-bad
messages return to the DLQ
byte for byte with ``dlq_attempt`` + 1. Progress is the consumer group
``ingest-dlq-replay``, committed per handled batch.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.structs import ConsumerRecord

from pipeline import kafka
from replay.session import (
    STALL_SECONDS,
    Ranges,
    ReplayReport,
    SessionRunner,
    topic_partitions,
    unfinished,
    wait_for_stops,
)
from router.routing import Routing

if TYPE_CHECKING:
    from ingress.records import Outgoing

DLQ_GROUP = "ingest-dlq-replay"

Restamp = Callable[[ConsumerRecord], "Outgoing"]
"""Ingress's transform of a raw record (its settings): an event, or a DLQ record."""

log = logging.getLogger(__name__)

# (topic, key, value, headers) of one record to produce.
_Send = tuple[str, bytes | None, bytes | None, list[tuple[str, bytes]]]


def _source_record(msg: ConsumerRecord) -> ConsumerRecord:
    """The raw message as ingress first saw it: its source coordinates, no dlq_* headers.

    Ingress's ``source`` stamping derives event_id from (topic, partition, offset);
    re-driving from these coordinates gives the very id the first attempt would
    have given, so the router's workflow ids stay stable.
    """
    topic = kafka.header(msg.headers, "dlq_source_topic")
    part = kafka.header(msg.headers, "dlq_source_partition")
    off = kafka.header(msg.headers, "dlq_source_offset")
    try:
        coords = (topic.decode(), int(part), int(off)) if topic and part and off else None
    except ValueError:
        coords = None
    if coords is None:
        coords = (msg.topic, msg.partition, msg.offset)
    headers = [(k, v) for k, v in msg.headers or () if not str(k).startswith(kafka.DLQ_PREFIX)]
    return replace(msg, topic=coords[0], partition=coords[1], offset=coords[2], headers=headers)


@dataclass(kw_only=True)
class DlqRedriver(SessionRunner):
    """Re-drives the DLQ once; :meth:`run` returns the report.

    ``restamp``: ingress's transform, applied to ingress rejections.
    ``reason``: only messages with this ``dlq_reason`` are re-driven; the others
    read in this run are appended to the DLQ again unchanged (same attempt), so
    the group's committed offset keeps meaning "everything before it was handled"
    and they are re-driven by a later run.
    """

    restamp: Restamp
    group: str = DLQ_GROUP
    reason: str | None = None
    counts: dict[str, int] = field(
        default_factory=lambda: dict.fromkeys(
            ("dlq_read", "to_events", "returned_to_dlq", "carried_forward"), 0
        ),
        init=False,
    )
    routed_done: set[tuple[int, int]] = field(default_factory=set, init=False)

    async def run(self) -> ReplayReport:
        # Room for the largest DLQ record (a too_large one may be re-driven after the fix).
        async with self.session(
            self.group,
            lambda tp, off: self.routed_done.add((tp.partition, off)),
            max_request_size=8 * 1024 * 1024,
        ) as session:
            ranges = await self._plan(session.consumer)
            complete = await self._consume(
                session.consumer, session.producer, session.routing, ranges
            )
            returned = self.counts["returned_to_dlq"] + session.routing.stats.dlq
            extra = {**self.counts, "returned_to_dlq": returned}
            return session.report(self.settings.kafka.dlq_topic, ranges, complete, extra)

    async def _plan(self, consumer: AIOKafkaConsumer) -> Ranges:
        topic = self.settings.kafka.dlq_topic
        tps = [TopicPartition(topic, p) for p in await topic_partitions(consumer, topic)]
        consumer.assign(tps)
        begin = await consumer.beginning_offsets(tps)
        end = await consumer.end_offsets(tps)
        ranges = {}
        for tp in tps:
            committed = await consumer.committed(tp)
            start = max(committed if committed is not None else 0, begin[tp])
            ranges[tp] = (start, max(start, end[tp]))
        return ranges

    async def _consume(
        self,
        consumer: AIOKafkaConsumer,
        producer: AIOKafkaProducer,
        routing: Routing,
        ranges: Ranges,
    ) -> bool:
        todo, total = unfinished(ranges)
        done = 0
        self.report_progress(0, total)
        for tp, (start, _) in ranges.items():
            consumer.seek(tp, start)
        idle = [tp for tp in ranges if tp not in todo]
        if idle:
            consumer.pause(*idle)
        last_data = time.monotonic()
        while todo and not self.stopping():
            batches = await kafka.getmany(
                consumer, *todo, timeout_ms=200, max_records=self.rcfg.max_poll_records
            )
            for tp, msgs in batches.items():
                wanted = [m for m in msgs if m.offset < todo.get(tp, -1)]
                if not wanted:
                    continue
                last_data = time.monotonic()
                if not await self._handle(producer, routing, wanted):
                    return False  # stopping: this batch stays uncommitted
                if not self.dry_run:
                    await consumer.commit({tp: wanted[-1].offset + 1})
                done += len(wanted)
                self.report_progress(done, total)
            await wait_for_stops(consumer, todo)
            if todo and time.monotonic() - last_data > STALL_SECONDS:
                return False
        return not todo

    async def _handle(
        self, producer: AIOKafkaProducer, routing: Routing, msgs: list[ConsumerRecord]
    ) -> bool:
        """Handle one partition's batch completely, or return False (shutdown)."""
        to_route: list[ConsumerRecord] = []
        sends: list[_Send] = []
        self.counts["dlq_read"] += len(msgs)
        for msg in msgs:
            reason = (kafka.header(msg.headers, "dlq_reason") or b"").decode("utf-8", "replace")
            component = kafka.header(msg.headers, "dlq_component")
            if (self.reason is not None and reason != self.reason) or component == b"relay":
                # Not this run's reason, or an outbox row the relay could not publish (an
                # emit, not an event: routing it would start runs from a task's message;
                # docs/kafka.md says how to publish it by hand once its topic takes it).
                self.counts["carried_forward"] += 1
                headers = [(k, bytes(v or b"")) for k, v in msg.headers or ()]
                sends.append((self.settings.kafka.dlq_topic, msg.key, msg.value, headers))
            elif component == b"ingress":
                sends.append(self._through_ingress(msg))
            else:
                to_route.append(msg)
        if to_route:
            self.routed_done.clear()
            tasks = await routing.submit(to_route)
            await asyncio.gather(*tasks)
            if len(self.routed_done) < len(to_route):
                return False
            await routing.flush_ledger()
        if not self.dry_run and sends:
            futs = [
                await producer.send(topic, value, key=key, headers=headers)
                for topic, key, value, headers in sends
            ]
            await asyncio.gather(*futs)
        return True

    def _through_ingress(self, msg: ConsumerRecord) -> _Send:
        """Ingress's own transform on the message as it first arrived; a still-bad one
        gets ``dlq_attempt`` + 1 and keeps its source."""
        k = self.settings.kafka
        out = self.restamp(_source_record(msg))
        if out.reason is None:
            self.counts["to_events"] += 1
            return out.topic, out.key, out.value, out.headers
        self.counts["returned_to_dlq"] += 1
        detail = (kafka.header(out.headers, "dlq_detail") or b"").decode("utf-8", "replace")
        log.info("still bad: %s[%d]@%d: %s", msg.topic, msg.partition, msg.offset, out.reason)
        return (
            k.dlq_topic,
            msg.key,
            msg.value,
            kafka.dlq_headers(msg, out.reason, detail, "ingress", redrive=True),
        )
