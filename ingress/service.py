"""The ingress loop: raw topic(s) -> stamped events topic (bad input -> DLQ).

At-least-once, batch by batch: ``getmany`` -> transform every message -> send
the records (one producer batch per events partition) -> wait for every
acknowledgement -> commit ``offset + 1`` per partition. Batches overlap: batch
N+2 is fetched and transformed while N+1 is being acknowledged and N committed
(N+1 is produced only after N is fully acknowledged; commits run one at a time,
in order). A raw offset is committed only once its record (event or DLQ) is
acknowledged by Kafka (``acks=all``, idempotent producer), so a crash anywhere
means redelivery, never loss; and because stamping is derived from the message
(never ``uuid4``), a redelivered message gets the same ``event_id`` again and
the router's deterministic workflow ids absorb the duplicate.

Rebalances: the revoke callback waits (bounded by ``revoke_wait_seconds``) for
every fetched batch to be acknowledged, then commits what is acknowledged for the revoked
partitions: only a contiguous acknowledged prefix per partition is ever
committed, so a message not yet produced is never skipped.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.errors import CommitFailedError, IllegalStateError, KafkaError, ProducerFenced
from aiokafka.structs import ConsumerRecord, TopicPartition

from ingress import records, stamping
from ingress.acks import BatchAcks
from ingress.delivery import RECORD_SLACK, DrainTimeout, FatalProduceError, deliver
from ingress.metrics import EVENTS_STAMPED
from ingress.records import COMPONENT, Outgoing, transform_all
from ingress.settings import IngressSettings
from ingress.stamping import Strategy
from ingress.traces import trace_records
from ingress.transactions import Listener, PartitionProducers, chunks
from pipeline import kafka, metrics, tracing
from pipeline.lag import LagSeconds
from pipeline.rebalance import Delegating
from pipeline.retry import RETRYING
from pipeline.runtime import Shutdown, serve_http
from pipeline.settings import Settings
from schemas import envelope

log = logging.getLogger(__name__)

ConsumerFactory = Callable[[], AIOKafkaConsumer]
ProducerFactory = Callable[[], AIOKafkaProducer]
# The transactional producers' retry backoff (see Ingress._transactional_producer): what
# aiokafka itself waits after CONCURRENT_TRANSACTIONS on AddPartitionsToTxn.
TXN_RETRY_BACKOFF_MS = 20
# Messages transformed between two yields to the event loop (see Ingress._prepare).
PREPARE_SLICE = 100


def raw_topics(settings: Settings) -> list[str]:
    """``KAFKA_RAW_TOPIC`` may name several topics, comma-separated."""
    topics = [t.strip() for t in settings.kafka.raw_topic.split(",") if t.strip()]
    if not topics:
        raise ValueError("KAFKA_RAW_TOPIC names no topic")
    return topics


# Every reason ingress may dead-letter with: the envelope's, the stamping strategies',
# and its own internal error.
DLQ_REASONS = (
    metrics.declared(envelope, "R_") | metrics.declared(stamping, "R_") | {records.R_INTERNAL}
)


def start_metrics_at_zero(settings: Settings, strategy: Strategy) -> None:
    """Every series ingress counts, at 0 from the start (see :mod:`pipeline.metrics`)."""
    metrics.start_at_zero(
        metrics.EVENTS_CONSUMED, component=[COMPONENT], topic=raw_topics(settings)
    )
    metrics.start_at_zero(EVENTS_STAMPED, strategy=[strategy.label, stamping.EXISTING])
    metrics.start_at_zero(metrics.DLQ_MESSAGES, component=[COMPONENT], reason=DLQ_REASONS)
    metrics.DEPENDENCY_FAILING_SECONDS.set_function(RETRYING.oldest_age)


class Ingress:
    """One ingress process. ``run()`` returns the exit code."""

    def __init__(
        self,
        settings: Settings,
        config: IngressSettings,
        shutdown: Shutdown,
        *,
        strategy: Strategy | None = None,
        consumer_factory: ConsumerFactory | None = None,
        producer_factory: ProducerFactory | None = None,
    ) -> None:
        self.settings = settings
        self.config = config
        self.shutdown = shutdown
        self.strategy = strategy or config.stamping()
        self.topics = raw_topics(settings)
        self._consumer_factory = consumer_factory or self._default_consumer
        self._producer_factory = producer_factory or self._default_producer
        self._consumer: AIOKafkaConsumer | None = None
        self._acked: dict[TopicPartition, int] = {}  # next offset to commit (acknowledged)
        self._committed: dict[TopicPartition, int] = {}
        self._commit_at = 0.0  # monotonic time the last commit began
        self._idle = asyncio.Event()  # set when no fetched batch awaits its acknowledgements
        self._idle.set()
        self._outstanding = 0
        self._shutdown_at: float | None = None
        self._last_lag = 0.0
        self._lag_seconds = LagSeconds(metrics.CONSUMER_LAG_SECONDS, COMPONENT)
        self.ready = False
        # Transactional mode (ingress.transactions): a producer per raw partition.
        self._txn: PartitionProducers | None = None
        if config.transactional:
            self._txn = PartitionProducers(
                config.group, self._transactional_producer, config.revoke_wait_seconds
            )

    # -- clients ---------------------------------------------------------------

    def _default_consumer(self) -> AIOKafkaConsumer:
        return kafka.consumer(
            self.settings.kafka, group_id=self.config.group, max_poll_records=self.config.batch_size
        )

    def _default_producer(self) -> AIOKafkaProducer:
        # Room for the largest accepted raw event plus the envelope we add; the
        # broker's own limit still applies and is handled as too_large.
        size = max(1024 * 1024, self.config.max_event_bytes * 2 + 64 * 1024)
        return kafka.producer(self.settings.kafka, max_request_size=size)

    def _transactional_producer(self, transactional_id: str) -> AIOKafkaProducer:
        size = max(1024 * 1024, self.config.max_event_bytes * 2 + 64 * 1024)
        return kafka.producer(
            self.settings.kafka,
            max_request_size=size,
            transactional_id=transactional_id,
            transaction_timeout_ms=int(self.config.transaction_timeout_seconds * 1000),
            # The coordinator answers CONCURRENT_TRANSACTIONS to the next transaction's first
            # request until the previous one's markers are written (a few ms); aiokafka then
            # waits retry_backoff_ms before asking again, 100 ms by default: most of a small
            # transaction's time (docs/benchmarks.md).
            retry_backoff_ms=TXN_RETRY_BACKOFF_MS,
        )

    # -- main loop -------------------------------------------------------------

    async def run(self) -> int:
        txn = self._txn
        producer = self._producer_factory() if txn is None else None
        consumer = self._consumer_factory()
        listener = (
            Delegating(self.on_revoked)
            if txn is None
            else Listener(self.on_revoked, lambda tps: txn.assign(consumer, tps))
        )
        consumer.subscribe(topics=self.topics, listener=listener)
        self._consumer = consumer
        started: list[AIOKafkaConsumer | AIOKafkaProducer] = []
        code = 0
        try:
            if producer is not None:
                await producer.start()
                started.append(producer)
            await consumer.start()
            started.append(consumer)
            self.ready = True
            log.info(
                "ingress consuming %s (group %s, strategy %s%s) -> %s, DLQ %s",
                ",".join(self.topics),
                self.config.group,
                self.config.strategy,
                ", transactional" if txn is not None else "",
                self.settings.kafka.events_topic,
                self.settings.kafka.dlq_topic,
            )
            if producer is not None:
                await self._loop(producer, consumer)
            else:
                await self._transactional_loop(consumer)
            log.info("shutdown: last batch committed, stopping")
        except (FatalProduceError, ProducerFenced) as exc:
            log.error("fatal produce error, exiting without committing the batch: %r", exc)
            code = 1
        except kafka.UndecodableBatch as exc:
            log.error("%s; exiting", exc)  # what came before it is delivered and committed
            code = 1
        except DrainTimeout as exc:
            log.error("shutdown grace period over before the batch was delivered: %s", exc)
            if txn is None:
                await self._commit(consumer)  # what was acknowledged
            code = 1
        finally:
            self.ready = False
            if txn is not None:
                await txn.close()
            for client in reversed(started):
                try:
                    await client.stop()
                except Exception:
                    log.exception("stopping %s failed", type(client).__name__)
        return code

    async def _loop(self, producer: AIOKafkaProducer, consumer: AIOKafkaConsumer) -> None:
        """Fetch and transform batch N+2 while N+1 is acknowledged and N committed.

        Batch N+1 is produced only once batch N is fully acknowledged. N's offsets
        are committed in the background (one commit at a time, in produce order)
        while N+1 is in flight and N+2 is fetched and transformed: the Kafka round
        trips (linger, replication, the commit) are hidden behind the next batch's
        CPU work instead of adding to it.
        """
        inflight: asyncio.Task[None] | None = None
        committing: asyncio.Task[None] | None = None
        undecodable: kafka.UndecodableBatch | None = None
        try:
            while not self.shutdown.requested:
                wait = 0 if inflight is not None else 500
                try:
                    batch = await kafka.getmany(
                        consumer, timeout_ms=wait, max_records=self.config.batch_size
                    )
                except kafka.UndecodableBatch as exc:
                    undecodable = exc  # deliver and commit what came before it, then stop
                    break
                self._lag_seconds.fetched(batch)
                nxt = await self._prepare(batch) if batch else None
                acked = inflight is not None
                if inflight is not None:
                    await inflight  # FatalProduceError / DrainTimeout propagate from here
                    inflight = None
                if nxt is not None:
                    inflight = asyncio.create_task(self._deliver(producer, *nxt))
                if self._commit_due(acked, committing):
                    if committing is not None:
                        await committing  # the previous commit first: offsets only move forward
                    committing = asyncio.create_task(self._commit_acked(consumer))
                    self._commit_at = time.monotonic()
                await self._maybe_update_lag(consumer)
            last = inflight is not None
            if inflight is not None:
                await inflight
                inflight = None
            if committing is not None:
                await committing
                committing = None
            if last or self._uncommitted():  # what the interval held back, too
                await self._commit_acked(consumer)
            if undecodable is not None:
                raise undecodable
        finally:
            if inflight is not None and not inflight.done():
                inflight.cancel()
                await asyncio.gather(inflight, return_exceptions=True)
            if committing is not None:
                # What it commits is acknowledged: let it finish (a fatal error then
                # exits without committing its own batch, which the next owner redelivers).
                await asyncio.gather(committing, return_exceptions=True)
            self._outstanding = 0
            self._idle.set()

    async def _transactional_loop(self, consumer: AIOKafkaConsumer) -> None:
        """Fetch a batch, stamp it, then one transaction per chunk of each partition.

        Partitions run their transactions concurrently, each on its own producer; within a
        partition they run in offset order and stop at the first that fails, so a later
        commit never covers records of one that did not commit. One batch at a time: the
        commit is the acknowledgement, there is nothing to overlap it with.
        """
        assert self._txn is not None
        size = max(self.config.batch_size, self.config.transaction_records)
        while not self.shutdown.requested:
            before = {tp: self._txn.generation(tp) for tp in consumer.assignment()}
            batch = await kafka.getmany(consumer, timeout_ms=500, max_records=size)
            # Only what was fetched within one assignment, with its producer ready, is ours to
            # commit (a partition is paused until then; see PartitionProducers.assign). Records
            # fetched across a rebalance are dropped, and a partition assigned again meanwhile
            # is sought back to where that assignment began: nothing of it is processed yet,
            # and those records may be from before it or from it.
            generations = {tp: self._txn.generation(tp) for tp in batch}
            for tp, gen in generations.items():
                if gen is None or before.get(tp) != gen:
                    log.info("%s/%d: records fetched across a rebalance dropped", *tp)
                    del batch[tp]
                    if gen is not None:
                        consumer.seek(tp, self._txn.start_offset(tp))
            if batch:
                self._lag_seconds.fetched(batch)
                records, acks = await self._prepare(batch)
                by_tp: dict[tuple[str, int], list[Outgoing]] = {}
                for rec in records:
                    by_tp.setdefault(rec.tp, []).append(rec)
                work = asyncio.gather(
                    *(
                        self._transact_partition(
                            consumer, tp, gen, msgs, by_tp[tp.topic, tp.partition], acks
                        )
                        for tp, msgs in batch.items()
                        if msgs and (gen := generations[tp]) is not None
                    )
                )
                await self._counted(acks, work)
            await self._maybe_update_lag(consumer)

    async def _transact_partition(
        self,
        consumer: AIOKafkaConsumer,
        tp: TopicPartition,
        generation: int,
        msgs: list[ConsumerRecord],
        records: list[Outgoing],
        acks: BatchAcks,
    ) -> None:
        assert self._txn is not None
        for part, recs in chunks(msgs, records, self.config.transaction_records):
            if not await self._txn.transact(consumer, tp, generation, part, recs, self._send):
                return
            acks.ack(recs)  # counted once committed: only then can anyone read them
            self._committed[tp] = part[-1].offset + 1
            self._lag_seconds.committed({tp: self._committed[tp]})

    async def _send(self, producer: AIOKafkaProducer, records: list[Outgoing]) -> None:
        """Deliver a transaction's records (its commit follows)."""
        await deliver(
            producer,
            records,
            dlq_topic=self.settings.kafka.dlq_topic,
            on_acked=lambda _: None,
            give_up=self._grace_over,
            backoff_min=self.config.retry_backoff_min_seconds,
            backoff_max=self.config.retry_backoff_max_seconds,
            record_max=self.config.max_event_bytes + RECORD_SLACK,
        )
        if self.config.fault_commit_delay_seconds:
            log.warning("fault injection: delaying the transaction's commit")
            await asyncio.sleep(self.config.fault_commit_delay_seconds)

    async def _prepare(
        self, batch: dict[TopicPartition, list[ConsumerRecord]]
    ) -> tuple[list[Outgoing], BatchAcks]:
        """Transform every message of ``batch``; from here until acknowledged it is in flight.

        Transforming a batch takes milliseconds of CPU: it yields to the event loop
        every ``PREPARE_SLICE`` messages, so the batch in flight is sent, and its
        acknowledgements and the running commit are read, during the transform and
        not after it.
        """
        self._outstanding += 1
        self._idle.clear()
        k = self.settings.kafka
        events, dlq, max_bytes = k.events_topic, k.dlq_topic, self.config.max_event_bytes
        records: list[Outgoing] = []
        for tp, msgs in batch.items():
            metrics.EVENTS_CONSUMED.labels(COMPONENT, tp.topic).inc(len(msgs))
            for i in range(0, len(msgs), PREPARE_SLICE):
                if records:
                    await asyncio.sleep(0)
                done = transform_all(
                    msgs[i : i + PREPARE_SLICE], strategy=self.strategy,
                    events_topic=events, dlq_topic=dlq, max_bytes=max_bytes,
                )  # fmt: skip
                if tracing.ENABLED:
                    trace_records(done, self.config.group)
                records.extend(done)
        return records, BatchAcks(batch)

    async def _deliver(
        self, producer: AIOKafkaProducer, records: list[Outgoing], acks: BatchAcks
    ) -> None:
        def on_acked(group: list[Outgoing]) -> None:
            for tp, offset in acks.ack(group).items():
                if offset > self._acked.get(tp, 0):
                    self._acked[tp] = offset

        await self._counted(
            acks,
            deliver(
                producer,
                records,
                dlq_topic=self.settings.kafka.dlq_topic,
                on_acked=on_acked,
                give_up=self._grace_over,
                backoff_min=self.config.retry_backoff_min_seconds,
                backoff_max=self.config.retry_backoff_max_seconds,
                record_max=self.config.max_event_bytes + RECORD_SLACK,
            ),
        )

    async def _counted(self, acks: BatchAcks, work: Awaitable[object]) -> None:
        """Await ``work`` (delivering a prepared batch), then count what it acknowledged."""
        try:
            await work
        finally:
            # Counted per batch, not per record: a labels() lookup per event is
            # measurable on this hot path. Only acknowledged records count.
            for label, n in acks.stamped.items():
                EVENTS_STAMPED.labels(label).inc(n)
            for reason, n in acks.dead.items():
                metrics.DLQ_MESSAGES.labels(COMPONENT, reason).inc(n)
            self._outstanding -= 1
            if self._outstanding <= 0:
                self._idle.set()

    def _commit_due(self, acked: bool, committing: asyncio.Task[None] | None) -> bool:
        """Whether to commit now: with ``INGEST_INGRESS_COMMIT_INTERVAL_MS`` 0, after every
        acknowledged batch; else at most once per interval, when an acknowledged offset is
        not committed and no commit is in flight. At a trickle a batch is one record, and a
        commit per batch was one broker request per event (issue 40); the interval trades
        it for at most one interval of records redelivered after a crash, which the
        contract absorbs (the same event ids, the same workflow ids). Shutdown and revoke
        commit what is acknowledged at once, whatever the interval."""
        interval = self.config.commit_interval_ms / 1000
        if interval == 0:
            return acked
        if committing is not None and not committing.done():
            return False
        if time.monotonic() - self._commit_at < interval:
            return False
        return self._uncommitted()

    def _uncommitted(self) -> bool:
        """An acknowledged offset is not committed yet."""
        return any(off > self._committed.get(tp, -1) for tp, off in self._acked.items())

    async def _commit_acked(self, consumer: AIOKafkaConsumer) -> None:
        if self.config.fault_commit_delay_seconds:
            log.warning("fault injection: delaying the commit")
            await self.shutdown.wait(self.config.fault_commit_delay_seconds)
        await self._commit(consumer)

    def _grace_over(self) -> bool:
        if not self.shutdown.requested:
            return False
        now = time.monotonic()
        if self._shutdown_at is None:
            self._shutdown_at = now
        return now - self._shutdown_at > self.settings.process.shutdown_grace_seconds

    # -- commits and rebalances -----------------------------------------------

    async def _commit(
        self, consumer: AIOKafkaConsumer, only: set[TopicPartition] | None = None
    ) -> None:
        """Commit the acknowledged prefix of each (still assigned) partition."""
        assigned = consumer.assignment()
        offsets = {
            tp: off
            for tp, off in self._acked.items()
            if tp in assigned and (only is None or tp in only) and off > self._committed.get(tp, -1)
        }
        if not offsets:
            return
        try:
            await consumer.commit(offsets)
        except (CommitFailedError, IllegalStateError) as exc:
            # The group moved on; those messages will be redelivered elsewhere
            # with the same ids, which the contract absorbs.
            log.warning("commit of %d partitions skipped: %s", len(offsets), exc)
            return
        except KafkaError as exc:
            log.warning("commit failed, will retry after the next batch: %s", exc)
            return
        self._committed.update(offsets)
        self._lag_seconds.committed(offsets)

    async def on_revoked(self, revoked: set[TopicPartition]) -> None:
        if not self._idle.is_set():
            try:
                await asyncio.wait_for(self._idle.wait(), self.config.revoke_wait_seconds)
            except TimeoutError:
                log.warning(
                    "revoke: in-flight batch still undelivered after %.0fs; committing "
                    "the acknowledged part only",
                    self.config.revoke_wait_seconds,
                )
        if self._txn is not None:
            await self._txn.release(revoked)  # its transactions hold the commits
        elif self._consumer is not None and revoked:
            await self._commit(self._consumer, only=revoked)
        for tp in revoked:
            self._acked.pop(tp, None)
            self._committed.pop(tp, None)
            try:
                metrics.CONSUMER_LAG.remove(COMPONENT, tp.topic, str(tp.partition))
            except KeyError:
                pass
        self._lag_seconds.forget(revoked)  # pipeline_consumer_lag_seconds, as above

    # -- lag ---------------------------------------------------------------------

    async def _maybe_update_lag(self, consumer: AIOKafkaConsumer) -> None:
        now = time.monotonic()
        if now - self._last_lag < self.config.lag_interval_seconds:
            return
        self._last_lag = now
        for tp in consumer.assignment():
            try:
                high = consumer.highwater(tp)
                if high is None:
                    continue
                base = self._committed.get(tp)
                if base is None:
                    base = await consumer.committed(tp)
                committed = base  # None: the group never committed this partition
                if base is None:
                    base = await consumer.position(tp)
            except (AssertionError, IllegalStateError, KafkaError):
                continue  # revoked meanwhile, or the broker is briefly away
            lag = max(0, high - base)
            metrics.CONSUMER_LAG.labels(COMPONENT, tp.topic, str(tp.partition)).set(lag)
            self._lag_seconds.refresh(tp, committed, high, base)


async def run_ingress(
    settings: Settings,
    shutdown: Shutdown,
    *,
    config: IngressSettings | None = None,
    strategy: Strategy | None = None,
    serve: bool = True,
) -> int:
    """Run until ``shutdown``; 0 after a clean drain, non-zero after a fatal error."""
    from ingress.settings import load_ingress_settings

    cfg = config or load_ingress_settings()
    ingress = Ingress(settings, cfg, shutdown, strategy=strategy)
    start_metrics_at_zero(settings, ingress.strategy)
    server = None
    if serve:
        server = await serve_http(
            settings.process.metrics_host,
            settings.process.metrics_port,
            lambda: ingress.ready,
        )
    try:
        return await ingress.run()
    finally:
        if server is not None:
            server.close()
            await server.wait_closed()
