"""Replaying a topic range, and re-driving the DLQ, through the live router's code path.

Why a separate reader and not "reset the router's group": a replay must never
move the live group's offsets (the live router keeps running during an
incident review) and must stop at a known end. So :class:`Replayer` assigns
partitions manually with no group at all, seeks by offset or
``offsets_for_times``, and reads up to the end offsets captured when it
started (or ``--to-time``). Every message goes through
:class:`router.routing.Routing` exactly as in the live router: one ledger
look-up per batch, REJECT_DUPLICATE starts, the same DLQ. So a replay starts
only what never ran: the ledger answers for anything routed before (even after
Temporal forgot it past its retention), Temporal for anything started but not
yet in the ledger.

:class:`DlqRedriver` re-reads the DLQ after a fix. It reads with its own group
(``ingest-dlq-replay``) and commits after each handled batch, so a message is
re-driven once; it stops at the end offsets captured at start, so a message
that fails again (and is appended to the DLQ with ``dlq_attempt`` + 1) is not
picked up again in the same run.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

import asyncpg
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.structs import ConsumerRecord
from temporalio.client import Client

from pipeline import kafka
from pipeline.settings import Settings
from router.catalog import ActivityCatalog
from router.config import RouterSettings
from router.ledger import Ledger
from router.routing import RoutePlanner, Routing, Stats
from router.starter import Starter

log = logging.getLogger(__name__)

DLQ_GROUP = "ingest-dlq-replay"
# A partition that yields nothing for this long while still short of its stop
# offset (e.g. only aborted transactional records left) is given up on.
STALL_SECONDS = 30.0

_Send = tuple[str, bytes | None, bytes | None, list[tuple[str, bytes]]]
"""(topic, key, value, headers) of one record to produce."""

Progress = Callable[[int, int], None]
"""``progress(done, total)``: messages handled so far out of the planned range."""


class ReplayError(Exception):
    """The requested range cannot be replayed (unknown topic or partition)."""


@dataclass(frozen=True)
class ReplayRange:
    """What to replay: one topic, a start (offset or time), an optional end time."""

    topic: str
    from_offset: int | None = None
    from_time: datetime | None = None
    to_time: datetime | None = None
    partitions: tuple[int, ...] | None = None


@dataclass
class ReplayReport:
    topic: str
    dry_run: bool
    ledger: bool
    stats: Stats
    elapsed_seconds: float
    # partition -> [first offset, stop offset (exclusive)]
    ranges: dict[int, tuple[int, int]] = field(default_factory=dict)
    complete: bool = True
    extra: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        s = self.stats
        return {
            "topic": self.topic,
            "dry_run": self.dry_run,
            "ledger": self.ledger,
            "complete": self.complete,
            "elapsed_seconds": round(self.elapsed_seconds, 3),
            "rate_per_second": round(s.read / self.elapsed_seconds, 1)
            if self.elapsed_seconds > 0
            else 0.0,
            "read": s.read,
            "already_routed_ledger": s.ledger_duplicates,
            "already_started_temporal": s.temporal_duplicates,
            "started": s.started,
            "would_start": s.would_start,
            "dlq": s.dlq,
            "unmatched": s.unmatched,
            **self.extra,
            "partitions": {str(p): list(r) for p, r in sorted(self.ranges.items())},
        }


def _ms(dt: datetime) -> int:
    if dt.tzinfo is None:
        raise ReplayError(f"{dt.isoformat()} has no time zone; give one (e.g. Z or +00:00)")
    return int(dt.timestamp() * 1000)


async def topic_partitions(consumer: AIOKafkaConsumer, topic: str) -> list[int]:
    """The partitions of ``topic`` (refreshing metadata); ReplayError if it does not exist."""
    for _ in range(30):
        # A group-less consumer's own cluster view only covers assigned topics, so ask for
        # full metadata (the public ``topics()`` returns names only).
        cluster = await consumer._client.fetch_all_metadata()
        parts = cluster.partitions_for_topic(topic)
        if parts:
            return sorted(parts)
        await asyncio.sleep(0.1)
    raise ReplayError(f"topic {topic!r} does not exist (KAFKA_BOOTSTRAP_SERVERS reachable?)")


async def plan_ranges(
    consumer: AIOKafkaConsumer, rng: ReplayRange
) -> dict[TopicPartition, tuple[int, int]]:
    """Per partition ``(start, stop)``: stop is the end offset now, or the first offset at
    or after ``to_time``; start is ``from_offset`` (clamped to the log start) or the first
    offset at or after ``from_time``."""
    parts = await topic_partitions(consumer, rng.topic)
    if rng.partitions is not None:
        unknown = sorted(set(rng.partitions) - set(parts))
        if unknown:
            raise ReplayError(f"topic {rng.topic!r} has partitions {parts}, not {unknown}")
        parts = sorted(set(rng.partitions))
    tps = [TopicPartition(rng.topic, p) for p in parts]
    begin = await consumer.beginning_offsets(tps)
    end = await consumer.end_offsets(tps)
    if rng.from_time is not None:
        ms = _ms(rng.from_time)
        found = await consumer.offsets_for_times({tp: ms for tp in tps})
        start = {tp: found[tp].offset if found.get(tp) else end[tp] for tp in tps}
    else:
        first = rng.from_offset or 0
        start = {tp: max(first, begin[tp]) for tp in tps}
    stop = dict(end)
    if rng.to_time is not None:
        ms = _ms(rng.to_time)
        found = await consumer.offsets_for_times({tp: ms for tp in tps})
        stop = {tp: min(end[tp], found[tp].offset) if found.get(tp) else end[tp] for tp in tps}
    return {tp: (start[tp], max(start[tp], stop[tp])) for tp in tps}


def build_routing(
    settings: Settings,
    rcfg: RouterSettings,
    *,
    client: Client,
    pool: asyncpg.Pool,
    catalog: ActivityCatalog,
    producer: AIOKafkaProducer,
    on_done: Callable[[TopicPartition, int], None],
    stopping: Callable[[], bool],
    dry_run: bool,
) -> Routing:
    """The same Routing the live router builds (component ``router``: messages a replay
    dead-letters are router rejections, and ``replay --dlq`` must route them again)."""
    return Routing(
        planner=RoutePlanner(catalog, rcfg.max_event_bytes),
        starter=Starter(client, settings.temporal.task_queue, stopping=stopping),
        producer=producer,
        dlq_topic=settings.kafka.dlq_topic,
        ledger=Ledger(pool) if rcfg.ledger else None,
        concurrency=rcfg.concurrency,
        on_done=on_done,
        stopping=stopping,
        dry_run=dry_run,
    )


class Replayer:
    """Replays one range of a topic; :meth:`run` returns the report."""

    def __init__(
        self,
        settings: Settings,
        rcfg: RouterSettings,
        *,
        client: Client,
        pool: asyncpg.Pool,
        dry_run: bool = False,
        progress: Progress | None = None,
        stopping: Callable[[], bool] = lambda: False,
    ) -> None:
        self.settings = settings
        self.rcfg = rcfg
        self.client = client
        self.pool = pool
        self.dry_run = dry_run
        self.progress = progress or (lambda done, total: None)
        self.stopping = stopping
        self.done = 0

    def _done(self, tp: TopicPartition, offset: int) -> None:
        self.done += 1

    async def run(self, rng: ReplayRange) -> ReplayReport:
        k = self.settings.kafka
        t0 = time.monotonic()
        consumer = kafka.consumer(k, group_id=None, max_poll_records=self.rcfg.max_poll_records)
        producer = kafka.producer(k)
        catalog = ActivityCatalog(self.pool, self.rcfg.refresh_seconds)
        await consumer.start()
        try:
            await producer.start()
            try:
                await catalog.start()
                try:
                    ranges = await plan_ranges(consumer, rng)
                    routing = build_routing(
                        self.settings,
                        self.rcfg,
                        client=self.client,
                        pool=self.pool,
                        catalog=catalog,
                        producer=producer,
                        on_done=self._done,
                        stopping=self.stopping,
                        dry_run=self.dry_run,
                    )
                    complete = await self._consume(consumer, routing, ranges)
                finally:
                    await catalog.stop()
            finally:
                await producer.stop()
        finally:
            await consumer.stop()
        return ReplayReport(
            topic=rng.topic,
            dry_run=self.dry_run,
            ledger=self.rcfg.ledger,
            stats=routing.stats,
            elapsed_seconds=time.monotonic() - t0,
            ranges={tp.partition: r for tp, r in ranges.items()},
            complete=complete,
        )

    async def _consume(
        self,
        consumer: AIOKafkaConsumer,
        routing: Routing,
        ranges: dict[TopicPartition, tuple[int, int]],
    ) -> bool:
        todo = {tp: stop for tp, (start, stop) in ranges.items() if start < stop}
        total = sum(stop - start for start, stop in ranges.values())
        self.progress(0, total)
        if not todo:
            return True
        consumer.assign(list(todo))
        for tp in todo:
            consumer.seek(tp, ranges[tp][0])
        in_flight: set[asyncio.Task[None]] = set()
        flush_every = self.rcfg.commit_interval_ms / 1000
        last_flush = last_data = time.monotonic()
        complete = True
        while todo:
            if self.stopping():
                complete = False
                break
            if len(in_flight) >= self.rcfg.max_in_flight:
                await asyncio.wait(in_flight, return_when=asyncio.FIRST_COMPLETED)
            else:
                batches = await consumer.getmany(
                    *todo, timeout_ms=200, max_records=self.rcfg.max_poll_records
                )
                for tp, msgs in batches.items():
                    stop = todo.get(tp)
                    wanted = [m for m in msgs if stop is not None and m.offset < stop]
                    if not wanted:
                        continue
                    last_data = time.monotonic()
                    for task in await routing.submit(wanted):
                        in_flight.add(task)
                        task.add_done_callback(in_flight.discard)
                for tp in list(todo):
                    if await consumer.position(tp) >= todo[tp]:
                        del todo[tp]
                        consumer.pause(tp)
                if todo and time.monotonic() - last_data > STALL_SECONDS:
                    log.warning(
                        "no records for %.0fs short of the stop offsets %s",
                        STALL_SECONDS,
                        {tp.partition: o for tp, o in todo.items()},
                    )
                    complete = False
                    break
            if time.monotonic() - last_flush > flush_every:
                await routing.flush_ledger()
                last_flush = time.monotonic()
            self.progress(self.done, total)
        grace = None if complete else self.settings.process.shutdown_grace_seconds
        if in_flight:
            _, still = await asyncio.wait(set(in_flight), timeout=grace)
            for t in still:
                t.cancel()
            if still:
                complete = False
                await asyncio.gather(*still, return_exceptions=True)
        await routing.flush_ledger()
        self.progress(total if complete else self.done, total)
        return complete


# --- DLQ re-drive ---------------------------------------------------------------


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


class DlqRedriver:
    """Re-drives the DLQ once; :meth:`run` returns the report.

    ``reason``: only messages with this ``dlq_reason`` are re-driven; the others
    read in this run are appended to the DLQ again unchanged (same attempt), so
    the group's committed offset keeps meaning "everything before it was handled"
    and they are re-driven by a later run.
    """

    def __init__(
        self,
        settings: Settings,
        rcfg: RouterSettings,
        *,
        client: Client,
        pool: asyncpg.Pool,
        group: str = DLQ_GROUP,
        reason: str | None = None,
        dry_run: bool = False,
        progress: Progress | None = None,
        stopping: Callable[[], bool] = lambda: False,
    ) -> None:
        self.settings = settings
        self.rcfg = rcfg
        self.client = client
        self.pool = pool
        self.group = group
        self.reason = reason
        self.dry_run = dry_run
        self.progress = progress or (lambda done, total: None)
        self.stopping = stopping
        self.counts = {"dlq_read": 0, "to_events": 0, "returned_to_dlq": 0, "carried_forward": 0}
        self.routed_done: set[tuple[int, int]] = set()
        self._ingress_cfg: Any = None

    async def run(self) -> ReplayReport:
        k = self.settings.kafka
        t0 = time.monotonic()
        consumer = kafka.consumer(
            k, group_id=self.group, max_poll_records=self.rcfg.max_poll_records
        )
        # Room for the largest DLQ record (a too_large one may be re-driven after the fix).
        producer = kafka.producer(k, max_request_size=8 * 1024 * 1024)
        catalog = ActivityCatalog(self.pool, self.rcfg.refresh_seconds)
        await consumer.start()
        try:
            await producer.start()
            try:
                await catalog.start()
                try:
                    ranges = await self._plan(consumer)
                    routing = build_routing(
                        self.settings,
                        self.rcfg,
                        client=self.client,
                        pool=self.pool,
                        catalog=catalog,
                        producer=producer,
                        on_done=lambda tp, off: self.routed_done.add((tp.partition, off)),
                        stopping=self.stopping,
                        dry_run=self.dry_run,
                    )
                    complete = await self._consume(consumer, producer, routing, ranges)
                finally:
                    await catalog.stop()
            finally:
                await producer.stop()
        finally:
            await consumer.stop()
        return ReplayReport(
            topic=k.dlq_topic,
            dry_run=self.dry_run,
            ledger=self.rcfg.ledger,
            stats=routing.stats,
            elapsed_seconds=time.monotonic() - t0,
            ranges={tp.partition: r for tp, r in ranges.items()},
            complete=complete,
            extra={
                **self.counts,
                "returned_to_dlq": self.counts["returned_to_dlq"] + routing.stats.dlq,
            },
        )

    async def _plan(self, consumer: AIOKafkaConsumer) -> dict[TopicPartition, tuple[int, int]]:
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
        ranges: dict[TopicPartition, tuple[int, int]],
    ) -> bool:
        todo = {tp: stop for tp, (start, stop) in ranges.items() if start < stop}
        total = sum(stop - start for start, stop in ranges.values())
        done = 0
        self.progress(0, total)
        for tp, (start, _) in ranges.items():
            consumer.seek(tp, start)
        idle = [tp for tp in ranges if tp not in todo]
        if idle:
            consumer.pause(*idle)
        last_data = time.monotonic()
        while todo and not self.stopping():
            batches = await consumer.getmany(
                *todo, timeout_ms=200, max_records=self.rcfg.max_poll_records
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
                self.progress(done, total)
            for tp in list(todo):
                if await consumer.position(tp) >= todo[tp]:
                    del todo[tp]
                    consumer.pause(tp)
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
            if self.reason is not None and reason != self.reason:
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
        """Ingress's own transform (its INGEST_INGRESS_* settings) on the message as it
        first arrived; a still-bad one gets ``dlq_attempt`` + 1 and keeps its source."""
        from ingress import config as ingress_config
        from ingress.records import transform

        if self._ingress_cfg is None:
            self._ingress_cfg = ingress_config.load()
        icfg = self._ingress_cfg
        k = self.settings.kafka
        out = transform(
            _source_record(msg),
            strategy=icfg.stamping(),
            events_topic=k.events_topic,
            dlq_topic=k.dlq_topic,
            max_bytes=icfg.max_event_bytes,
        )
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
            kafka.dlq_headers(msg, out.reason, detail, "ingress"),
        )
