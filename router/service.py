"""The live router: events topic -> ``RunActivityWorkflow`` starts, committing only what is done.

Loop: fetch a batch, hand it to :class:`router.routing.Routing` (which spawns
one task per message, starts run concurrently under a bound), keep fetching
while fewer than ``max_in_flight`` messages (and ``max_in_flight_bytes`` of them)
are unfinished. A committer task,
every ``commit_interval_ms``: computes each partition's highest contiguous done
offset, writes the ledger rows of acknowledged starts, then commits. On revoke
it drains the revoked partitions and commits them; on SIGTERM it stops
fetching, drains, commits and exits.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

import asyncpg
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from temporalio.client import Client

from pipeline import kafka, metrics
from pipeline.lag import LagSeconds
from pipeline.offsets import OffsetTracker
from pipeline.rebalance import Delegating
from pipeline.retry import RETRYING
from pipeline.runtime import Shutdown
from pipeline.settings import Settings
from pipeline.starter import R_START_REJECTED, START_ERROR_LABELS
from router.budget import InFlightBytes
from router.catalog import ActivityCatalog
from router.flow import windows
from router.routing import R_ROUTE_FAILED, R_RUN_TOO_LARGE, Routing, build_routing
from router.settings import RouterSettings
from schemas import envelope
from schemas.flow import spec as flow
from schemas.workflow_io import TRIGGER_EVENT

log = logging.getLogger(__name__)


# Every reason the router may dead-letter with: the envelope's, a refused start, a flow key.
DLQ_REASONS = metrics.declared(envelope, "R_") | {
    R_START_REJECTED,
    R_ROUTE_FAILED,
    R_RUN_TOO_LARGE,
    flow.R_FLOW_KEY_MISSING,
    flow.R_BAD_FLOW_KEY,
}


def start_metrics_at_zero(settings: Settings, component: str = "router") -> None:
    """Every series the router counts, at 0 from the start (see :mod:`pipeline.metrics`)."""
    metrics.start_at_zero(
        metrics.EVENTS_CONSUMED, component=[component], topic=[settings.kafka.events_topic]
    )
    metrics.start_at_zero(metrics.WORKFLOWS_STARTED, trigger=[TRIGGER_EVENT])
    metrics.start_at_zero(
        metrics.DUPLICATES_SUPPRESSED,
        component=[component],
        trigger=[TRIGGER_EVENT],
        layer=[metrics.LAYER_LEDGER, metrics.LAYER_TEMPORAL],
    )
    metrics.start_at_zero(metrics.DLQ_MESSAGES, component=[component], reason=DLQ_REASONS)
    metrics.DEPENDENCY_FAILING_SECONDS.set_function(RETRYING.oldest_age)
    metrics.start_at_zero(metrics.START_ERRORS, component=[component], error=START_ERROR_LABELS)


class Router:
    def __init__(
        self,
        settings: Settings,
        rcfg: RouterSettings,
        *,
        client: Client,
        pool: asyncpg.Pool,
        shutdown: Shutdown,
        component: str = "router",
    ) -> None:
        self.settings = settings
        self.rcfg = rcfg
        self.client = client
        self.pool = pool
        self.shutdown = shutdown
        self.component = component
        self.tracker = OffsetTracker()
        self.lag_seconds = LagSeconds(metrics.CONSUMER_LAG_SECONDS, component)
        self.in_flight_bytes = InFlightBytes(rcfg.max_in_flight_bytes)
        self.tasks: dict[TopicPartition, set[asyncio.Task[None]]] = {}
        self.catalog = ActivityCatalog(pool, rcfg.refresh_seconds)
        self.consumer: AIOKafkaConsumer | None = None
        self.producer: AIOKafkaProducer | None = None
        self.routing: Routing | None = None
        self._commit_lock = asyncio.Lock()
        self._progress = asyncio.Event()
        self.ready = False

    # --- lifecycle --------------------------------------------------------------

    async def run(self) -> None:
        k = self.settings.kafka
        self.producer = kafka.producer(k)
        self.consumer = kafka.consumer(
            k, group_id=self.rcfg.group, max_poll_records=self.rcfg.max_poll_records
        )
        await self.catalog.start()
        await self.producer.start()
        self.routing = build_routing(
            self.settings,
            self.rcfg,
            client=self.client,
            pool=self.pool,
            catalog=self.catalog,
            producer=self.producer,
            on_done=self._done,
            stopping=lambda: self.shutdown.requested,
            component=self.component,
            group=self.rcfg.group,
        )
        self.consumer.subscribe([k.events_topic], listener=Delegating(self.on_revoked))
        await self.consumer.start()
        committer = asyncio.create_task(self._commit_loop(), name="router-commit")
        housekeeping = asyncio.create_task(self._housekeeping(), name="router-housekeeping")
        self.ready = True
        log.info(
            "routing %s (group %s) to task queue %s, concurrency %d",
            k.events_topic,
            self.rcfg.group,
            self.settings.temporal.task_queue,
            self.rcfg.concurrency,
        )
        try:
            await self._fetch_loop()
        finally:
            self.ready = False
            await self._drain(self.settings.process.shutdown_grace_seconds)
            committer.cancel()
            housekeeping.cancel()
            await asyncio.gather(committer, housekeeping, return_exceptions=True)
            with contextlib.suppress(Exception):
                await self.commit()
            await self.consumer.stop()
            await self.producer.stop()
            await self.catalog.stop()
            log.info("router stopped; stats %s", self.routing.stats.as_dict())

    async def _fetch_loop(self) -> None:
        assert self.consumer is not None and self.routing is not None
        while not self.shutdown.requested:
            if self.tracker.in_flight >= self.rcfg.max_in_flight or self.in_flight_bytes.full:
                self._progress.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._progress.wait(), 0.5)
                continue
            batches = await kafka.getmany(
                self.consumer, timeout_ms=200, max_records=self.rcfg.max_poll_records
            )
            self.lag_seconds.fetched(batches)
            for tp, msgs in batches.items():
                if not msgs:
                    continue
                metrics.EVENTS_CONSUMED.labels(component=self.component, topic=tp.topic).inc(
                    len(msgs)
                )
                for m in msgs:
                    self.tracker.add(tp, m.offset)
                for msg, task in zip(msgs, await self.routing.submit(msgs), strict=True):
                    self.in_flight_bytes.hold(msg, task)
                    bucket = self.tasks.setdefault(tp, set())
                    bucket.add(task)
                    task.add_done_callback(bucket.discard)

    def _done(self, tp: TopicPartition, offset: int) -> None:
        self.tracker.mark_done(tp, offset)
        self._progress.set()

    async def _drain(self, grace: float, tps: set[TopicPartition] | None = None) -> None:
        """Wait up to ``grace`` seconds for in-flight tasks, then cancel what is left."""
        pending = [t for tp, ts in self.tasks.items() if tps is None or tp in tps for t in ts]
        if not pending:
            return
        log.info("draining %d in-flight messages (up to %.0fs)", len(pending), grace)
        _, still = await asyncio.wait(pending, timeout=grace)
        for t in still:
            t.cancel()
        if still:
            log.warning("%d messages not finished in time; they will be redelivered", len(still))
            await asyncio.gather(*still, return_exceptions=True)

    async def on_revoked(self, revoked: set[TopicPartition]) -> None:
        """Drain the revoked partitions' starts, commit them, and forget them."""
        if not revoked:
            return
        await self._drain(self.rcfg.revoke_drain_seconds, revoked)
        try:
            await self.commit(revoked)
        except Exception as exc:
            log.warning("commit on revoke failed: %s", exc)
        self.tracker.forget(revoked)
        for tp in revoked:
            self.tasks.pop(tp, None)
            with contextlib.suppress(KeyError):
                metrics.CONSUMER_LAG.remove(self.component, tp.topic, str(tp.partition))
        self.lag_seconds.forget(revoked)  # pipeline_consumer_lag_seconds, as above

    # --- commits --------------------------------------------------------------

    async def commit(self, tps: set[TopicPartition] | None = None) -> None:
        """Ledger first, then offsets: a committed offset always has its ledger rows."""
        assert self.consumer is not None and self.routing is not None
        async with self._commit_lock:
            offsets = self.tracker.committable(tps)
            await self.routing.flush_ledger()
            if not offsets:
                return
            await self.consumer.commit(offsets)  # type: ignore[arg-type]
            self.tracker.advance(offsets)
            self.lag_seconds.committed(offsets)

    async def _commit_loop(self) -> None:
        interval = self.rcfg.commit_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                await self.commit()
            except Exception as exc:
                log.warning("commit failed, will retry: %s", exc)

    async def _housekeeping(self) -> None:
        """Consumer lag gauge every 5 s; ledger (and started flow windows) pruning every hour."""
        assert self.consumer is not None and self.routing is not None
        last_prune = 0.0
        while True:
            await asyncio.sleep(5)
            for tp in self.consumer.assignment():
                high = self.consumer.highwater(tp)
                part = self.tracker.parts.get(tp)
                committed = part.committed if part and part.committed is not None else None
                if high is not None and committed is not None:
                    metrics.CONSUMER_LAG.labels(
                        component=self.component, topic=tp.topic, partition=str(tp.partition)
                    ).set(max(0, high - committed))
                    self.lag_seconds.refresh(tp, committed, high)
            if self.routing.ledger and time.monotonic() - last_prune > 3600:
                last_prune = time.monotonic()
                try:
                    n = await self.routing.ledger.prune(self.rcfg.ledger_retention_days)
                    if self.routing.gate is not None:  # skip records live as long
                        n += await self.routing.gate.store.prune(self.rcfg.ledger_retention_days)
                    n += await windows.prune(self.pool, self.rcfg.ledger_retention_days)
                    if self.routing.order is not None:  # closed places of flow.ordered lines
                        n += await self.routing.order.prune(self.rcfg.ledger_retention_days)
                    if n:
                        log.info(
                            "pruned %d ledger rows older than %.0f days",
                            n,
                            self.rcfg.ledger_retention_days,
                        )
                except Exception as exc:
                    log.warning("ledger prune failed: %s", exc)
