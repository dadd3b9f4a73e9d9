"""Transactional ingress: one transactional producer per raw partition, one transaction per chunk.

Opt-in (``INGEST_INGRESS_TRANSACTIONAL=true``). A chunk is up to ``transaction_records``
consecutive fetched records of one raw partition; its transaction holds the raw offset
commit (``send_offsets_to_transaction``), the stamped events and the DLQ records. A crash
leaves the transaction open, and whoever owns the partition next aborts it: no stamped
event becomes visible to a ``read_committed`` reader without its offset commit, and no
offset is committed without its events.

**Producers and rebalances.** aiokafka speaks only transaction protocol v0, without
KIP-447's consumer-group metadata, so the broker fences a zombie by ``transactional_id``
alone. Each raw partition therefore has its own id, formed in one place
(:func:`schemas.ids.ingress_transactional_id`, from the group and the topic-partition),
and a producer of its own:

* **assigned**: for each new partition, start its producer and wait for its producer id
  (InitProducerId: this bumps the id's epoch, which aborts, or lets finish, a previous
  owner's open transaction and fences that owner for good); only then read the partition's
  committed offset from the group coordinator and seek there. Reading it before the fence
  could return an offset a zombie's commit was about to move, and redo those records.
* **revoked**: wait (``revoke_wait_seconds``) for the partition's transaction in flight to
  end, then stop its producer. A transaction still open past the wait is left to the next
  owner, whose InitProducerId aborts it; its later failure here (fenced) is expected and
  only logged.

**aiokafka bugs designed around.** aio-libs/aiokafka #1004 ("Unexpected error during
batch delivery" when records are sent before the offsets, seen with Kafka 3.7+): the
offsets go first, right after ``begin_transaction``, then the records. #1098 (a
``KeyError`` in ``TxnOffsetCommitHandler`` when offset commits of one producer overlap):
one ``send_offsets_to_transaction`` per transaction, with a fresh dict, awaited before
anything else, and a producer never runs two transactions at once (one per partition, a
lock around each); no transaction step is ever cancelled, since cancelling a waiter leaves
the sender's handlers running. If the sender still dies, its error is fatal: ingress exits 1
with the transaction open and the next owner aborts it. #920 (the consumer's position is
past the records of an aborted transaction, so they would be skipped): after an abort the
partition is sought back to the chunk's first offset, and later chunks of the same fetch are
dropped, so a commit never covers records that were not in a committed transaction.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterator

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.errors import ProducerFenced
from aiokafka.structs import ConsumerRecord, TopicPartition

from ingress.records import Outgoing
from pipeline.rebalance import Delegating
from schemas.ids import ingress_transactional_id

log = logging.getLogger(__name__)

ProducerFactory = Callable[[str], AIOKafkaProducer]  # transactional_id -> producer
Send = Callable[[AIOKafkaProducer, list[Outgoing]], Awaitable[None]]


def chunks(
    msgs: list[ConsumerRecord], records: list[Outgoing], size: int
) -> Iterator[tuple[list[ConsumerRecord], list[Outgoing]]]:
    """``msgs`` of one partition and their outgoing records (one each, in order), by ``size``."""
    for i in range(0, len(msgs), size):
        yield msgs[i : i + size], records[i : i + size]


class Listener(Delegating):
    """The rebalance listener of transactional ingress: revokes as ingress's, and assignments
    handed to :meth:`PartitionProducers.assign` (which also logs them)."""

    def __init__(
        self,
        on_revoked: Callable[[set[TopicPartition]], Awaitable[None]],
        on_assigned: Callable[[set[TopicPartition]], Awaitable[None]],
    ) -> None:
        super().__init__(on_revoked)
        self._on_assigned = on_assigned

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        await self._on_assigned(set(assigned))
        await super().on_partitions_assigned(assigned)


class PartitionProducers:
    """The transactional producer of each assigned raw partition, and its transactions."""

    def __init__(self, group: str, make: ProducerFactory, revoke_wait: float) -> None:
        self.group = group
        self._make = make
        self._revoke_wait = revoke_wait
        self._producers: dict[TopicPartition, AIOKafkaProducer] = {}
        self._locks: dict[TopicPartition, asyncio.Lock] = {}
        # Bumped at every assignment of a partition: a chunk fetched under an earlier
        # assignment is never committed under a later one (the seek there may have moved back).
        self._generation: dict[TopicPartition, int] = {}
        self._closing: set[asyncio.Task[None]] = set()
        self._start_offset: dict[TopicPartition, int] = {}  # sought to at the assignment

    def start_offset(self, tp: TopicPartition) -> int:
        """Where the partition's current assignment began (its committed offset then)."""
        return self._start_offset[tp]

    def generation(self, tp: TopicPartition) -> int | None:
        """The partition's current assignment, or None when it is not ours."""
        return self._generation.get(tp) if tp in self._producers else None

    async def assign(self, consumer: AIOKafkaConsumer, assigned: set[TopicPartition]) -> None:
        """Start (and so fence with) each new partition's producer, then seek to its commit."""
        new = sorted(assigned - set(self._producers))
        if not new:
            return
        # Paused before the first await: the consumer's own committed-offset lookup, made at
        # the join, before the fence, may be stale, and nothing fetched from it may be returned.
        consumer.pause(*new)
        started = await asyncio.gather(*(self._start(tp) for tp in new))
        # Only now, with every previous owner fenced and its transaction ended, is the
        # committed offset final.
        committed = {tp: await consumer.committed(tp) for tp in new}
        for tp, producer in zip(new, started, strict=True):
            offset = committed[tp]
            if offset is None:
                await consumer.seek_to_beginning(tp)  # ingress's auto_offset_reset
                offset = await consumer.position(tp)
            else:
                consumer.seek(tp, offset)
            self._start_offset[tp] = offset
            self._producers[tp] = producer
            self._locks[tp] = asyncio.Lock()
            self._generation[tp] = self._generation.get(tp, 0) + 1
        consumer.resume(*new)
        log.info("transactional producers ready for %d partitions", len(new))

    async def _start(self, tp: TopicPartition) -> AIOKafkaProducer:
        producer = self._make(ingress_transactional_id(self.group, tp.topic, tp.partition))
        await producer.start()
        # begin_transaction waits for the producer id (InitProducerId, the fence); an empty
        # transaction ends locally, without a request.
        await producer.begin_transaction()
        await producer.abort_transaction()
        return producer

    async def release(self, revoked: set[TopicPartition]) -> None:
        """Stop the producers of ``revoked`` once their transaction in flight (if any) ended."""
        await asyncio.gather(*(self._release(tp) for tp in revoked if tp in self._producers))

    async def _release(self, tp: TopicPartition) -> None:
        producer, lock = self._producers.pop(tp), self._locks.pop(tp)
        try:
            await asyncio.wait_for(lock.acquire(), self._revoke_wait)
        except TimeoutError:
            log.warning(
                "revoke: transaction on %s/%d still open after %.0fs; the next owner aborts it",
                tp.topic,
                tp.partition,
                self._revoke_wait,
            )
            task = asyncio.create_task(self._stop_after(producer, lock))
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)
            return
        try:
            await producer.stop()
        finally:
            lock.release()

    @staticmethod
    async def _stop_after(producer: AIOKafkaProducer, lock: asyncio.Lock) -> None:
        async with lock:
            await producer.stop()

    async def close(self) -> None:
        await self.release(set(self._producers))
        if self._closing:
            await asyncio.gather(*self._closing, return_exceptions=True)

    async def transact(
        self,
        consumer: AIOKafkaConsumer,
        tp: TopicPartition,
        generation: int,
        msgs: list[ConsumerRecord],
        records: list[Outgoing],
        send: Send,
    ) -> bool:
        """Commit ``records`` and the offset after ``msgs`` in one transaction.

        False (nothing committed) when the partition is no longer ours; raises what the
        transaction raised after aborting it and seeking back to its first offset.
        """
        if self.generation(tp) != generation:
            return False
        producer, lock = self._producers[tp], self._locks[tp]
        async with lock:
            await producer.begin_transaction()
            try:
                # Offsets first (aiokafka #1004), once, in a dict of their own (#1098).
                await producer.send_offsets_to_transaction({tp: msgs[-1].offset + 1}, self.group)
                await send(producer, records)
                await producer.commit_transaction()
            except ProducerFenced:
                if self.generation(tp) == generation:
                    raise
                log.info("%s/%d: fenced by its next owner, as expected", tp.topic, tp.partition)
                return False
            except BaseException:
                await self._abort(consumer, producer, tp, generation, msgs[0].offset)
                raise
        return True

    async def _abort(
        self,
        consumer: AIOKafkaConsumer,
        producer: AIOKafkaProducer,
        tp: TopicPartition,
        generation: int,
        first: int,
    ) -> None:
        try:
            await producer.abort_transaction()
        except Exception as exc:  # a fatal producer: the next owner aborts it
            log.warning("abort on %s/%d failed: %r", tp.topic, tp.partition, exc)
        if self.generation(tp) == generation:
            consumer.seek(tp, first)  # aiokafka #920: the position is past the aborted records
