"""What a topic replay and a DLQ re-drive share: clients, the router's Routing, the report.

:meth:`SessionRunner.session` starts a consumer, a producer and the activity catalog,
builds the same :class:`router.routing.Routing` the live router uses, and stops
all three again in reverse order, whatever happens in between.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import KW_ONLY, dataclass, field
from typing import Any

import asyncpg
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from temporalio.client import Client

from pipeline import kafka, tracing
from pipeline.settings import Settings
from router.catalog import ActivityCatalog
from router.routing import Routing, Stats, build_routing
from router.settings import RouterSettings
from schemas.errors import IngestError

# A partition that yields nothing for this long while still short of its stop
# offset (e.g. only aborted transactional records left) is given up on.
STALL_SECONDS = 30.0

Progress = Callable[[int, int], None]
"""``progress(done, total)``: messages handled so far out of the planned range."""

Ranges = dict[TopicPartition, tuple[int, int]]
"""Per partition ``(first offset, stop offset (exclusive))``."""


class ReplayError(IngestError):
    """The requested range cannot be replayed (unknown topic or partition, a record batch
    that cannot be decoded)."""


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
            "skipped": s.skipped,
            "would_start": s.would_start,
            "windowed": s.windowed,  # new members of debounce windows and batches
            "dlq": s.dlq,
            "unmatched": s.unmatched,
            **self.extra,
            "partitions": {str(p): list(r) for p, r in sorted(self.ranges.items())},
        }


@dataclass
class Session:
    """The started clients of one replay and its Routing."""

    consumer: AIOKafkaConsumer
    producer: AIOKafkaProducer
    routing: Routing
    dry_run: bool
    ledger: bool
    t0: float

    def report(
        self, topic: str, ranges: Ranges, complete: bool, extra: dict[str, int] | None = None
    ) -> ReplayReport:
        return ReplayReport(
            topic=topic,
            dry_run=self.dry_run,
            ledger=self.ledger,
            stats=self.routing.stats,
            elapsed_seconds=time.monotonic() - self.t0,
            ranges={tp.partition: r for tp, r in ranges.items()},
            complete=complete,
            extra=extra or {},
        )


async def topic_partitions(consumer: AIOKafkaConsumer, topic: str, tries: int = 30) -> list[int]:
    """The partitions of ``topic`` (refreshing metadata up to ``tries`` times, 0.1 s apart);
    ReplayError if it does not exist."""
    for _ in range(tries):
        # aiokafka's public API has no partitions-of-any-topic call: ``topics()`` fetches
        # the full metadata but returns names only, and ``partitions_for_topic()`` reads
        # the cached view, which a group-less consumer fills only for assigned topics.
        # ``fetch_all_metadata`` is what ``topics()`` itself calls (an admin client's
        # ``describe_topics`` would cost a second connection for one call).
        cluster = await consumer._client.fetch_all_metadata()
        parts = cluster.partitions_for_topic(topic)
        if parts:
            return sorted(parts)
        await asyncio.sleep(0.1)
    raise ReplayError(f"topic {topic!r} does not exist (KAFKA_BOOTSTRAP_SERVERS reachable?)")


@dataclass
class SessionRunner:
    """Base of :class:`replay.topic.Replayer` and :class:`replay.dlq.DlqRedriver`: what
    they are given, and :meth:`session` over it."""

    settings: Settings
    rcfg: RouterSettings
    _: KW_ONLY
    client: Client
    pool: asyncpg.Pool
    dry_run: bool = False
    progress: Progress | None = None
    stopping: Callable[[], bool] = lambda: False

    def report_progress(self, done: int, total: int) -> None:
        if self.progress is not None:
            self.progress(done, total)

    @asynccontextmanager
    async def session(
        self,
        group: str | None,
        on_done: Callable[[TopicPartition, int], None],
        **producer_overrides: Any,
    ) -> AsyncIterator[Session]:
        """Consumer (``group`` None: no consumer group), producer and catalog, started
        and stopped in order, with the live router's Routing over them."""
        t0 = time.monotonic()
        k = self.settings.kafka
        consumer = kafka.consumer(k, group_id=group, max_poll_records=self.rcfg.max_poll_records)
        producer = kafka.producer(k, **producer_overrides)
        catalog = ActivityCatalog(self.pool, self.rcfg.refresh_seconds)
        await consumer.start()
        try:
            await producer.start()
            try:
                await catalog.start()
                try:
                    # Tracing on: the session is a root span, and each replayed message's
                    # span (in its event's own trace) links to it.
                    with tracing.child("replay", dry_run=self.dry_run, group=group) as span:
                        routing = build_routing(
                            self.settings,
                            self.rcfg,
                            client=self.client,
                            pool=self.pool,
                            catalog=catalog,
                            producer=producer,
                            on_done=on_done,
                            stopping=self.stopping,
                            dry_run=self.dry_run,
                            group=group,
                            trace_links=tracing.links_to(span),
                        )
                        yield Session(
                            consumer, producer, routing, self.dry_run, self.rcfg.ledger, t0
                        )
                except kafka.UndecodableBatch as exc:
                    raise ReplayError(str(exc)) from exc
                finally:
                    await catalog.stop()
            finally:
                await producer.stop()
        finally:
            await consumer.stop()


async def wait_for_stops(consumer: AIOKafkaConsumer, todo: dict[TopicPartition, int]) -> None:
    """Drop (and pause) every partition of ``todo`` whose position reached its stop offset."""
    for tp in list(todo):
        if await consumer.position(tp) >= todo[tp]:
            del todo[tp]
            consumer.pause(tp)


def unfinished(ranges: Ranges) -> tuple[dict[TopicPartition, int], int]:
    """The partitions with something to read (-> their stop offset), and how many
    messages the whole range holds."""
    todo = {tp: stop for tp, (start, stop) in ranges.items() if start < stop}
    return todo, sum(stop - start for start, stop in ranges.values())
