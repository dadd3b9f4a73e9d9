"""Producing one batch until every record is acknowledged, or failing loudly.

Records go to Kafka as one closed producer batch per topic-partition (one future
each, sent without linger); a batch the broker refuses for a non-retriable
reason is sent again record by record, so the verdicts below are per record.

Failure classes (aiokafka marks retriability on the error class):

* retriable (broker down, leader moving, request timed out): back off and send
  the unacknowledged records again. Nothing is committed meanwhile, so a crash
  here only means redelivery, and stamping is stable.
* too large for Kafka: a stamped event becomes a DLQ record (reason
  ``too_large``); a DLQ record that is itself too large is sent without its
  value (header ``dlq_value_omitted``), its ``dlq_source_*`` headers still say
  where the original lives. The partition never stalls on one message.
* anything else (authorisation, a fenced or broken idempotent producer): raise
  :class:`FatalProduceError`; the process exits non-zero without committing.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from aiokafka import AIOKafkaProducer

from ingress.records import Outgoing, to_dlq
from pipeline.kafka import (
    DLQ_PREFIX,
    H_HEADERS_OMITTED,
    H_VALUE_OMITTED,
    is_retriable,
    is_too_large,
    key_partition,
    record_bytes,
)
from pipeline.retry import BACKOFF_INITIAL, BACKOFF_MAX, RETRYING, backoff, since_began
from schemas.envelope import R_TOO_LARGE
from schemas.errors import IngestError

log = logging.getLogger(__name__)


class FatalProduceError(IngestError):
    """A produce failure that retrying will not fix."""


class DrainTimeout(IngestError):
    """Shutdown was requested and the batch could not be delivered within the grace period."""

    retriable = True  # the batch stays uncommitted: the next owner delivers it


# A record larger than this is sent on its own: it would fill a batch by itself,
# and a size rejection should name it alone, not fail a batch of small ones.
BATCH_RECORD_MAX = 64 * 1024

# (records, error or None, whether they went as one batch)
Result = tuple[list[Outgoing], BaseException | None, bool]


async def _send_singles(producer: AIOKafkaProducer, records: list[Outgoing]) -> list[Result]:
    """``send`` every record, then wait for every acknowledgement.

    A record whose ``send`` fails with a retriable error (typically no metadata:
    the broker is unreachable) stops the round; the rest are marked with the same
    error instead of each waiting out its own metadata timeout.
    """
    futures: list[tuple[Outgoing, asyncio.Future[object] | BaseException]] = []
    blocked: BaseException | None = None
    counts: dict[str, int] = {}
    for rec in records:
        if blocked is not None:
            futures.append((rec, blocked))
            continue
        try:
            partition = None
            if rec.key is not None:
                partition = key_partition(rec.key, await _count(producer, rec.topic, counts))
            fut = await producer.send(
                rec.topic, value=rec.value, key=rec.key, headers=rec.headers, partition=partition
            )
            futures.append((rec, fut))
        except Exception as exc:
            futures.append((rec, exc))
            if is_retriable(exc):
                blocked = exc
    return [([rec], await _outcome(fut), False) for rec, fut in futures]


async def _count(producer: AIOKafkaProducer, topic: str, counts: dict[str, int]) -> int:
    n = counts.get(topic)
    if n is None:
        n = counts[topic] = len(await producer.partitions_for(topic))
    return n


async def _outcome(fut: asyncio.Future[object] | BaseException) -> BaseException | None:
    if isinstance(fut, BaseException):
        return fut
    try:
        await fut
    except Exception as exc:
        return exc
    return None


async def _send_round(
    producer: AIOKafkaProducer, records: list[Outgoing], singles: list[Outgoing], largest: int
) -> list[Result]:
    """Send ``records`` as one closed batch per topic-partition, ``singles`` one by one.

    A closed batch leaves at once (no linger) and is acknowledged as one future:
    no per-record ``send`` coroutine, future or metadata. Keyless records (rare:
    DLQ copies of keyless raw messages) and large ones go as singles.

    Order per partition: a keyed record that goes alone is queued in its place among its
    partition's batches (the batch before it is closed, the next one opened after it),
    and the producer sends a partition's batches in the order they were queued (one
    request in flight per partition, idempotent): one key's records reach Kafka in
    their raw order (flow.ordered relies on it).
    """
    groups: list[tuple[str, int, Any, list[Outgoing]]] = []
    open_: dict[tuple[str, int], tuple[Any, list[Outgoing]]] = {}
    counts: dict[str, int] = {}
    singles = list(singles)
    for rec in records:
        key, value = rec.key, rec.value
        if key is None:
            singles.append(rec)
            continue
        n = counts.get(rec.topic)
        if n is None:
            n = await _count(producer, rec.topic, counts)
        tp = (rec.topic, key_partition(key, n))
        if len(value or b"") > largest or record_bytes(rec) - len(value or b"") > BATCH_RECORD_MAX:
            # Large records go alone: a batch the broker refuses for its size costs the
            # idempotent producer its sequence numbers, while send() checks a single
            # record's size against max_request_size before it is numbered. In its place
            # among its partition's records: the open batch ends before it.
            open_.pop(tp, None)
            groups.append((*tp, None, [rec]))
            continue
        cur = open_.get(tp)
        if cur is None:
            cur = open_[tp] = (producer.create_batch(), [])
            groups.append((*tp, *cur))
        if cur[0].append(timestamp=None, key=key, value=value, headers=rec.headers) is None:
            cur = open_[tp] = (producer.create_batch(), [])  # full: this one starts the next
            groups.append((*tp, *cur))
            cur[0].append(timestamp=None, key=key, value=value, headers=rec.headers)
        cur[1].append(rec)
    futures: list[tuple[list[Outgoing], asyncio.Future[object] | BaseException, bool]] = []
    blocked: BaseException | None = None
    for topic, partition, builder, recs in groups:
        if blocked is not None:
            futures.append((recs, blocked, builder is not None))
            continue
        try:
            if builder is None:  # a large keyed record, alone in its place
                (one,) = recs
                fut = await producer.send(topic, value=one.value, key=one.key,
                                          headers=one.headers, partition=partition)  # fmt: skip
            else:
                builder.close()
                fut = await producer.send_batch(builder, topic, partition=partition)
            futures.append((recs, fut, builder is not None))
        except Exception as exc:
            futures.append((recs, exc, builder is not None))
            if is_retriable(exc):
                blocked = exc
    out = await _send_singles(producer, singles) if singles else []
    out.extend([(recs, await _outcome(fut), batched) for recs, fut, batched in futures])
    return out


# What a record may carry above INGEST_MAX_EVENT_BYTES of value: its key and headers. The
# broker's default message.max.bytes (1,048,588) holds a 1,000,000-byte value with this
# much room and the batch's own overhead; a topic must accept max_event_bytes + this.
RECORD_SLACK = 32 * 1024


def _fit(rec: Outgoing, record_max: int, dlq_topic: str) -> Outgoing:
    """``rec``, or its smaller forms until it is at most ``record_max`` bytes."""
    while (size := record_bytes(rec)) > record_max:
        rec = _too_large_fallback(rec, f"{size} bytes, over {record_max}", dlq_topic)
    return rec


def _too_large_fallback(rec: Outgoing, exc: BaseException | str, dlq_topic: str) -> Outgoing:
    """The next, smaller form of a record Kafka refused for its size: a stamped event
    becomes its DLQ record; a DLQ record loses its value; then the producer's own headers
    and key too (``dlq_headers_omitted``: a raw record of huge headers and a small value),
    keeping only the dlq_* headers that say where the original lives, and its
    coordinates ``topic/partition@offset`` as the key."""
    where = f"{rec.source.topic}/{rec.source.partition}@{rec.source.offset}"
    if rec.reason is None:
        return to_dlq(rec.source, dlq_topic, R_TOO_LARGE, f"stamped event rejected by Kafka: {exc}")
    if rec.value is not None:
        log.error("DLQ record for %s too large for Kafka; sending it without its value", where)
        # Kafka needs a key or a value: a keyless record gets its coordinates as key.
        key = rec.key if rec.key is not None else where.encode()
        return rec._replace(key=key, value=None, headers=[*rec.headers, (H_VALUE_OMITTED, b"1")])
    if any(not k.startswith(DLQ_PREFIX) for k, _ in rec.headers) or (
        rec.key is not None and rec.key != where.encode()
    ):
        log.error("DLQ record for %s still too large; sending only its dlq_* headers", where)
        ours = [(k, v) for k, v in rec.headers if k.startswith(DLQ_PREFIX)]
        # Kafka needs a key or a value: the coordinates, which the headers repeat.
        return rec._replace(key=where.encode(), headers=[*ours, (H_HEADERS_OMITTED, b"1")])
    raise FatalProduceError(f"DLQ record rejected even without its value: {exc!r}")


async def deliver(
    producer: AIOKafkaProducer,
    records: list[Outgoing],
    *,
    dlq_topic: str,
    on_acked: Callable[[list[Outgoing]], None],
    give_up: Callable[[], bool],
    sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    clock: Callable[[], float] = time.monotonic,
    backoff_min: float = BACKOFF_INITIAL,
    backoff_max: float = BACKOFF_MAX,
    batch_record_max: int = BATCH_RECORD_MAX,
    record_max: int | None = None,
) -> None:
    """Return once every record (or its DLQ replacement) is acknowledged.

    ``record_max``: the bytes (key, value, headers) a record may have when it leaves;
    a larger one is shrunk before it is sent (:func:`_too_large_fallback`, as often as
    needed), never refused by the broker: a broker's size refusal costs the idempotent
    producer its sequence numbers on that partition, and the next send there fails with
    OutOfOrderSequenceNumber (the fuzzer's records of about 1 MB of headers did that).

    ``on_acked`` is called with each acknowledged group of records (a batch, or
    one record). A retry waits what is left of its backoff delay after the failed
    round's own time (``pipeline.retry.since_began``: a round that waited out a broker's
    request timeout is retried at once). ``give_up`` is polled before each retry; when it says so
    (shutdown grace exhausted) this raises :class:`DrainTimeout` and the caller
    commits only what was acknowledged. Records larger than ``batch_record_max``
    bytes are sent one by one.
    """
    pending: list[Outgoing] = (
        records if record_max is None else [_fit(r, record_max, dlq_topic) for r in records]
    )
    singles: list[Outgoing] = []
    delays = backoff(backoff_min, backoff_max)
    delay = next(delays)
    with RETRYING.loop("produce") as failed:  # /readyz: 503 while it fails
        while pending or singles:
            began = clock()
            results = await _send_round(producer, pending, singles, batch_record_max)
            pending, singles = [], []
            retriable: BaseException | None = None
            for recs, exc, batched in results:
                if exc is None:
                    on_acked(recs)
                elif is_retriable(exc):
                    pending.extend(recs)
                    retriable = exc
                elif batched:
                    # One record may be what the broker refused (too large, invalid):
                    # send them one by one, so each gets its own verdict.
                    singles.extend(recs)
                elif is_too_large(exc):
                    pending.append(_too_large_fallback(recs[0], exc, dlq_topic))
                else:
                    raise FatalProduceError(
                        f"producing to {recs[0].topic} failed: {type(exc).__name__}: {exc}"
                    ) from exc
            if retriable is not None:
                failed(retriable)
                if give_up():
                    raise DrainTimeout(
                        f"{len(pending) + len(singles)} records not acknowledged: {retriable!r}"
                    )
                wait = since_began(delay, clock() - began)
                log.warning(
                    "retriable produce failure (%s: %s); retrying %d records in %.1fs",
                    type(retriable).__name__,
                    retriable,
                    len(pending) + len(singles),
                    wait,
                )
                await sleep(wait)
                delay = next(delays)
