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
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

import asyncpg
from aiokafka import AIOKafkaProducer

from pipeline import kafka
from pipeline.metrics import OUTBOX_DEPTH, OUTBOX_PUBLISHED, RELAY_ABORTED, RELAY_LAG
from pipeline.retry import backoff
from pipeline.runtime import Shutdown
from pipeline.settings import Settings
from relay import outbox, progress
from relay.outbox import Position, Row
from relay.settings import RelaySettings
from schemas.ids import relay_transactional_id

log = logging.getLogger("relay")
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

    async def run(self) -> None:
        """Until shutdown: wait for the lock, lead, and start over after any failure."""
        delays = backoff()
        while not self.shutdown.requested:
            try:
                conn = await asyncpg.connect(self.cfg.database.url.get_secret_value())
            except (OSError, asyncpg.PostgresError) as exc:
                log.warning("cannot reach PostgreSQL: %s", exc)
                await self.shutdown.wait(next(delays))
                continue
            try:
                self.ready = True
                if await self._wait_for_lock(conn):
                    await self._lead(conn)
                delays = backoff()
            except Exception as exc:  # any failure ends this term; the next starts clean
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
            if await outbox.try_lock(conn, self.transactional_id):
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
            while not self.shutdown.requested:
                rows = await outbox.visible_after(conn, pos, self.rcfg.batch_size)
                if rows:
                    await self._publish(producer, rows)
                    pos = rows[-1].position
                    OUTBOX_PUBLISHED.inc(len(rows))
                    await outbox.mirror(conn, self.transactional_id, pos)
                    await producer.begin_transaction()
                await self._report(conn, pos)
                await self._prune(conn)
                if not rows:
                    await self.shutdown.wait(self.rcfg.poll_interval_ms / 1000)
        finally:
            await producer.stop()

    async def _publish(self, producer: AIOKafkaProducer, rows: list[Row]) -> None:
        """Send the rows, then the progress record after the last, and commit the
        transaction begun before (aborted, and counted, on any error)."""
        try:
            sent = [
                await producer.send(r.topic, r.body, key=r.key, headers=r.headers) for r in rows
            ]
            sent.append(
                await producer.send(
                    self.rcfg.progress_topic,
                    progress.encode(rows[-1]),
                    key=self.transactional_id.encode(),
                )
            )
            await asyncio.gather(*sent)
            if self.rcfg.fault_commit_delay_seconds:  # tests only: keep the transaction open
                await self.shutdown.wait(self.rcfg.fault_commit_delay_seconds)
            await producer.commit_transaction()
        except BaseException:
            RELAY_ABORTED.inc()
            with contextlib.suppress(Exception):
                await producer.abort_transaction()
            raise

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
