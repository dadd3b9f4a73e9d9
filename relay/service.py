"""The relay loop: own the outbox, then publish it in Kafka transactions.

One relay owns an outbox at a time, twice over:

* a PostgreSQL session advisory lock (``outbox.try_lock``) on the connection every
  outbox query of the relay runs on: a standby relay polls for it, and gets it as
  soon as the owner's connection closes (the owner stopped, or died: the server
  sees its socket close);
* the Kafka ``transactional_id`` (``schemas.ids.relay_transactional_id``): the new
  owner's ``init_transactions`` bumps the producer epoch, so a zombie (an old owner
  whose lock was lost while it still runs, e.g. cut off from PostgreSQL) can no
  longer commit; its open transaction is aborted.

Each batch is one Kafka transaction: the rows, in ``(txid, seq)`` order, each to its
topic with its key and headers (the ``task_id`` header is the dedupe id), then the
progress record (``relay.progress``). Only after the commit does the relay advance
its position. Any error ends the term: the transaction is aborted (counted), the
producer and the connection are dropped, and the relay starts over, from the lock
and the progress read back from Kafka. So a relay killed at any instant neither
skips a row nor publishes one twice, as a ``read_committed`` consumer sees it.

Each record carries the ``traceparent`` its outbox row was written with (the task step's,
tracing on in the worker); with tracing on here too, its ``publish <topic>`` PRODUCER span
is a child of that context, and the record carries the span's context instead
(``pipeline.tracing.producing``). Neither changes what is sent when, or the transaction.

A row Kafka refuses for good (too large for the producer or the topic, an illegal
topic name) is published as a DLQ record in its place, in the same transaction
(``relay.refusals``): what the relay learns from a refusal outlives the aborted
transaction and the term, so the same row never stops the relay twice the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

import asyncpg
from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError

from pipeline import db, kafka, tracing
from pipeline.metrics import DEPENDENCY_FAILING_SECONDS, DLQ_MESSAGES
from pipeline.retry import RETRYING, backoff
from pipeline.runtime import Shutdown
from pipeline.settings import Settings
from relay import outbox, progress, refusals
from relay.metrics import OUTBOX_DEPTH, OUTBOX_PUBLISHED, RELAY_ABORTED, RELAY_LAG
from relay.outbox import Position, Row
from relay.refusals import Stage
from relay.settings import RelaySettings
from schemas.ids import relay_transactional_id

log = logging.getLogger("relay")
refusals.start_metrics_at_zero()  # on import: `ingest relay` has no other setup step
DEPENDENCY_FAILING_SECONDS.set_function(RETRYING.oldest_age)  # the relay term's failures
METRICS_EVERY = 1.0  # seconds between depth/lag queries


class Relay:
    def __init__(self, cfg: Settings, rcfg: RelaySettings, shutdown: Shutdown) -> None:
        self.cfg = cfg
        self.rcfg = rcfg
        self.shutdown = shutdown
        self.transactional_id = relay_transactional_id(rcfg.instance)
        self.leading = False
        self.ready = False
        self._metrics_at = 0.0
        self._pruned_at = 0.0
        # Rows Kafka refused, and what to send for each next: kept across terms.
        self.verdicts = refusals.Refusals()
        self._committed = False  # a transaction committed since the last failed term

    async def run(self) -> None:
        """Until shutdown: wait for the lock, lead, and start over after any failure."""
        delays = backoff()
        while not self.shutdown.requested:
            try:
                conn = await db.connect(
                    self.cfg.database.url.get_secret_value(),
                    command_timeout=self.cfg.database.command_timeout,
                    server_settings=db.KEEPALIVES,  # the outbox lock dies with a lost link
                )
            except (OSError, asyncpg.PostgresError) as exc:
                RETRYING.failed(self, "relay: connect to PostgreSQL", exc)  # /readyz: 503
                log.warning("cannot reach PostgreSQL: %s", exc)
                await self.shutdown.wait(next(delays))
                continue
            try:
                self.ready = True
                if await self._wait_for_lock(conn):
                    await self._lead(conn)
                delays = backoff()
            except Exception as exc:  # any failure ends this term; the next starts clean
                if self._committed:  # the last term got somewhere: a new failure, not a
                    delays, self._committed = backoff(), False  # long outage's next one
                RETRYING.failed(self, "relay term", exc)  # /readyz: 503 until one commits
                log.warning("relay term ended: %s: %s; starting over", type(exc).__name__, exc)
                await self.shutdown.wait(next(delays))
            finally:
                self.leading = False
                with contextlib.suppress(Exception):
                    await conn.close()

    async def _wait_for_lock(self, conn: asyncpg.Connection) -> bool:
        """True once this relay holds the lock; False on shutdown. Reports the backlog
        while it waits (a standby's metrics still show a stalled owner)."""
        waiting_logged = False
        while not self.shutdown.requested:
            locked = await outbox.try_lock(conn, self.transactional_id)
            RETRYING.cleared(self)  # PostgreSQL answers: a standby is ready too
            if locked:
                log.info("relay %s owns the outbox", self.transactional_id)
                return True
            if not waiting_logged:
                log.info("another relay owns the outbox; standing by")
                waiting_logged = True
            await self._report(conn, await outbox.mirrored(conn, self.transactional_id))
            await self.shutdown.wait(self.rcfg.lock_retry_seconds)
        return False

    async def _lead(self, conn: asyncpg.Connection) -> None:
        await progress.ensure_topic(self.cfg.kafka, self.rcfg.progress_topic)
        producer = kafka.producer(
            self.cfg.kafka,
            transactional_id=self.transactional_id,
            transaction_timeout_ms=self.rcfg.transaction_timeout_ms,
        )
        await producer.start()
        try:
            # begin_transaction waits for init_transactions (InitProducerId): only then
            # is the previous owner fenced and its last transaction completed, so only
            # then is the progress read back the last committed one. A transaction
            # is begun locally; nothing reaches the broker before the first send.
            await producer.begin_transaction()
            pos = await progress.read(
                self.cfg.kafka, self.rcfg.progress_topic, self.transactional_id
            )
            log.info("resuming after txid %d seq %d", pos.txid, pos.seq)
            await outbox.mirror(conn, self.transactional_id, pos)
            self.leading = True
            RETRYING.cleared(self)  # a term is up: PostgreSQL, Kafka and the lock answered
            while not self.shutdown.requested:
                rows = await outbox.visible_after(conn, pos, self.rcfg.batch_size)
                if rows:
                    dead = await self._publish(producer, rows)
                    pos = rows[-1].position
                    OUTBOX_PUBLISHED.inc(len(rows))
                    self._dead_lettered(dead)
                    self.verdicts.forget_through(pos)
                    self._committed = True
                    await outbox.mirror(conn, self.transactional_id, pos)
                    await producer.begin_transaction()
                await self._report(conn, pos)
                await self._prune(conn)
                if not rows:
                    await self.shutdown.wait(self.rcfg.poll_interval_ms / 1000)
        finally:
            await producer.stop()

    async def _publish(self, producer: AIOKafkaProducer, rows: list[Row]) -> list[Row]:
        """Send the rows, then the progress record after the last, and commit the
        transaction begun before (aborted, and counted, on any error). A row Kafka
        refuses for good is sent as its DLQ record instead (``relay.refusals``); returns
        those rows (committed as DLQ records)."""
        unsettled: list[tuple[Row, asyncio.Future[object]]] = []
        last: asyncio.Future[object] | None = None
        try:
            for row in rows:
                await self._queue(producer, row, unsettled)
            last = await producer.send(
                self.rcfg.progress_topic,
                progress.encode(rows[-1]),
                key=self.transactional_id.encode(),
            )
            await self._settle(unsettled)
            await last
            if self.rcfg.fault_commit_delay_seconds:  # tests only: keep the transaction open
                await self.shutdown.wait(self.rcfg.fault_commit_delay_seconds)
            await producer.commit_transaction()
        except BaseException:
            RELAY_ABORTED.inc()
            _ignore_outcomes([f for _, f in unsettled] + ([last] if last else []))
            with contextlib.suppress(Exception):
                await producer.abort_transaction()
            raise
        return [r for r in rows if self.verdicts.stage(r) >= Stage.DLQ]

    async def _queue(
        self,
        producer: AIOKafkaProducer,
        row: Row,
        unsettled: list[tuple[Row, asyncio.Future[object]]],
    ) -> None:
        """Queue what ``row``'s stage says to send. From stage ALONE on, it goes in a
        batch of its own (what was queued before is settled first, and it at once), so
        the broker's verdict is its own. On the client's refusal (``send`` raises:
        nothing was queued) its next form is queued at once, in the same transaction."""
        while True:
            refused = self.verdicts.get(row)
            alone = refused.stage >= Stage.ALONE
            if alone:
                await self._settle(unsettled)
            rec = refusals.record(row, refused, self.cfg.kafka.dlq_topic)
            try:
                if refused.stage < Stage.DLQ and (bad := refusals.topic_error(row.topic)):
                    raise bad
                if tracing.ENABLED:  # the record's publish span, its context in the header
                    fut = await self._send_traced(producer, rec, row)
                else:
                    fut = await producer.send(
                        rec.topic, rec.value, key=rec.key, headers=rec.headers
                    )
            except KafkaError as exc:
                if refusals.reason_for(exc) is None:
                    raise
                self.verdicts.refused(row, exc, alone=True)
                continue
            unsettled.append((row, fut))
            if alone:
                await self._settle(unsettled)
            return

    @staticmethod
    async def _send_traced(
        producer: AIOKafkaProducer, rec: refusals.Record, row: Row
    ) -> asyncio.Future[object]:
        """``producer.send`` inside the ``publish <topic>`` PRODUCER span, a child of the
        traceparent the record carries (the outbox row's: the task step that wrote it),
        whose own context the record carries instead. A record without one: no span."""
        headers = list(rec.headers)
        with tracing.producing(rec.topic, headers, outbox_id=row.id):
            fut: asyncio.Future[object] = await producer.send(
                rec.topic, rec.value, key=rec.key, headers=headers
            )
        return fut

    async def _settle(self, unsettled: list[tuple[Row, asyncio.Future[object]]]) -> None:
        """Wait for every record queued so far. A refusal moves its row to its next stage
        for the next attempt; any failure fails the transaction (the first error)."""
        if not unsettled:
            return
        results = await asyncio.gather(*(f for _, f in unsettled), return_exceptions=True)
        failed = [(row, r) for (row, _), r in zip(unsettled, results, strict=True)
                  if isinstance(r, BaseException)]  # fmt: skip
        unsettled.clear()
        if not failed:
            return
        moved = 0
        for row, exc in failed:
            if refusals.reason_for(exc) is not None:
                self.verdicts.refused(row, exc, alone=self.verdicts.stage(row) >= Stage.ALONE)
                moved += 1
        if moved:
            log.warning(
                "Kafka refused the records of %d outbox rows (%s); the transaction is aborted,"
                " and the next attempt sends each alone, or as its DLQ record",
                moved,
                type(failed[0][1]).__name__,
            )
        raise failed[0][1]

    def _dead_lettered(self, rows: list[Row]) -> None:
        """Count and log the rows just committed as DLQ records, once each."""
        for row in rows:
            r = self.verdicts.get(row)
            DLQ_MESSAGES.labels(component=refusals.COMPONENT, reason=r.reason).inc()
            log.error(
                "outbox row %s for %s refused by Kafka for good (%s); published to the DLQ"
                " %s as %s%s",
                row.id,
                row.topic,
                r.detail,
                self.cfg.kafka.dlq_topic,
                r.reason,
                {
                    Stage.DLQ_NO_VALUE: " without its value",
                    Stage.DLQ_BARE: " without its value, key and headers",
                }.get(r.stage, ""),
            )

    async def _report(self, conn: asyncpg.Connection, pos: Position) -> None:
        if time.monotonic() - self._metrics_at < METRICS_EVERY:
            return
        self._metrics_at = time.monotonic()
        depth, lag = await outbox.backlog(conn, pos)
        OUTBOX_DEPTH.set(depth)
        RELAY_LAG.set(lag)

    async def _prune(self, conn: asyncpg.Connection) -> None:
        if time.monotonic() - self._pruned_at < self.rcfg.prune_interval_seconds:
            return
        self._pruned_at = time.monotonic()
        n = await outbox.prune(conn, self.transactional_id, self.rcfg.retention_days)
        if n:
            log.info("pruned %d published outbox rows", n)


def _ignore_outcomes(futures: list[asyncio.Future[object]]) -> None:
    """The records of an aborted transaction: their outcomes no longer matter (nor
    should asyncio log them as never retrieved)."""
    for f in futures:
        f.add_done_callback(lambda f: f.cancelled() or f.exception())
