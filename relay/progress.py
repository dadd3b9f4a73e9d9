"""The relay's progress on Kafka: one record per transaction, on a compacted topic.

The record (key: the transactional id; value: ``{"txid", "seq", "id"}`` of the last
row published) is sent inside the same Kafka transaction as the rows it covers, so
the rows and the progress commit or abort together. A starting relay reads it back
with ``read_committed`` only after its producer's ``init_transactions``: that fences
the previous relay and completes whatever transaction it left (the coordinator
answers ``init_transactions`` only once the old transaction's markers are written),
so the last committed progress is what it reads.

No consumer offsets are involved: the relay never calls
``send_offsets_to_transaction``, the aiokafka path with known bugs (aio-libs/aiokafka
#1004, #1098, #920). And the read stops at the last stable offset minus one, since in
a topic written only in transactions the last offset before it is a commit or abort
marker that aiokafka's position may never step over (aio-libs/aiokafka #911).
"""

from __future__ import annotations

import time

import orjson
from aiokafka import TopicPartition

from pipeline import kafka
from pipeline.clients import ensure_topics
from pipeline.settings import KafkaSettings
from relay.outbox import START, Position, Row
from schemas.errors import IngestError


class ProgressError(IngestError):
    """The progress topic holds a record this relay cannot read: where it stands is
    unknown, so it publishes nothing (starting over from the outbox's first row would
    publish every row again). Not retriable: the record stays until an operator acts."""

    def __init__(self, topic: str, offset: int | None, cause: BaseException) -> None:
        at = f" at offset {offset}" if offset is not None else ""
        super().__init__(
            f"relay progress topic {topic!r} has an unreadable record{at}:"
            f" {type(cause).__name__}: {cause}"
        )


def encode(row: Row) -> bytes:
    pos = row.position
    return orjson.dumps({"txid": str(pos.txid), "seq": pos.seq, "id": row.id})


def decode(value: bytes) -> Position:
    """The position in a progress record; ``ValueError``/``KeyError``/``TypeError``
    when it is not one."""
    doc = orjson.loads(value)
    return Position(int(doc["txid"]), int(doc["seq"]))


async def ensure_topic(cfg: KafkaSettings, topic: str) -> bool:
    """Create the progress topic (1 partition, compacted) unless it exists; True if created."""
    return bool(await ensure_topics(cfg, [topic], 1, configs={"cleanup.policy": "compact"}))


async def read(cfg: KafkaSettings, topic: str, key: str, timeout: float = 60) -> Position:
    """The last committed progress under ``key`` (START when there is none)."""
    tp = TopicPartition(topic, 0)
    consumer = kafka.consumer(cfg, group_id=None, isolation_level="read_committed")
    await consumer.start()
    try:
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        end = (await consumer.end_offsets([tp]))[tp]  # read_committed: the LSO
        pos, want = START, key.encode()
        deadline = time.monotonic() + timeout
        while await consumer.position(tp) < end - 1:
            if time.monotonic() > deadline:
                raise TimeoutError(f"reading {topic} to offset {end} took over {timeout}s")
            try:
                batch = await kafka.getmany(consumer, tp, timeout_ms=500)
            except kafka.UndecodableBatch as exc:
                raise ProgressError(topic, exc.offset, exc) from exc
            for msg in batch.get(tp, []):
                if msg.key == want and msg.value is not None:
                    try:
                        pos = max(pos, decode(msg.value))
                    except (ValueError, KeyError, TypeError) as exc:
                        raise ProgressError(topic, msg.offset, exc) from exc
        return pos
    finally:
        await consumer.stop()
