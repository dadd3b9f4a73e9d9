"""Producing one batch until every record is acknowledged, or failing loudly.

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
from collections.abc import Awaitable, Callable

from aiokafka import AIOKafkaProducer
from aiokafka.errors import MessageSizeTooLargeError, RecordTooLargeError

from ingress.records import Outgoing, to_dlq
from pipeline.kafka import is_retriable, key_partition
from schemas.envelope import R_TOO_LARGE

log = logging.getLogger(__name__)


class FatalProduceError(Exception):
    """A produce failure that retrying will not fix."""


class DrainTimeout(Exception):
    """Shutdown was requested and the batch could not be delivered within the grace period."""


def is_too_large(exc: BaseException) -> bool:
    return isinstance(exc, MessageSizeTooLargeError | RecordTooLargeError)


async def _send_round(
    producer: AIOKafkaProducer, records: list[Outgoing]
) -> list[tuple[Outgoing, BaseException | None]]:
    """Send every record, then wait for every acknowledgement.

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
                n = counts.get(rec.topic)
                if n is None:
                    n = counts[rec.topic] = len(await producer.partitions_for(rec.topic))
                partition = key_partition(rec.key, n)
            fut = await producer.send(
                rec.topic, value=rec.value, key=rec.key, headers=rec.headers, partition=partition
            )
            futures.append((rec, fut))
        except Exception as exc:
            futures.append((rec, exc))
            if is_retriable(exc):
                blocked = exc
    out: list[tuple[Outgoing, BaseException | None]] = []
    for rec, fut in futures:
        if isinstance(fut, BaseException):
            out.append((rec, fut))
            continue
        try:
            await fut
            out.append((rec, None))
        except Exception as exc:
            out.append((rec, exc))
    return out


def _too_large_fallback(rec: Outgoing, exc: BaseException, dlq_topic: str) -> Outgoing:
    if rec.reason is None:
        return to_dlq(rec.source, dlq_topic, R_TOO_LARGE, f"stamped event rejected by Kafka: {exc}")
    if rec.value is not None:
        log.error(
            "DLQ record for %s/%d@%d too large for Kafka; sending it without its value",
            rec.source.topic,
            rec.source.partition,
            rec.source.offset,
        )
        return rec._replace(value=None, headers=[*rec.headers, ("dlq_value_omitted", b"1")])
    raise FatalProduceError(f"DLQ record rejected even without its value: {exc!r}")


async def deliver(
    producer: AIOKafkaProducer,
    records: list[Outgoing],
    *,
    dlq_topic: str,
    on_acked: Callable[[Outgoing], None],
    give_up: Callable[[], bool],
    sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    backoff_min: float = 0.2,
    backoff_max: float = 10.0,
) -> None:
    """Return once every record (or its DLQ replacement) is acknowledged.

    ``on_acked`` is called once per acknowledged record. ``give_up`` is polled
    before each retry; when it says so (shutdown grace exhausted) this raises
    :class:`DrainTimeout` and the caller commits only what was acknowledged.
    """
    pending = records
    delay = backoff_min
    while pending:
        results = await _send_round(producer, pending)
        pending = []
        retriable: BaseException | None = None
        for rec, exc in results:
            if exc is None:
                on_acked(rec)
            elif is_too_large(exc):
                pending.append(_too_large_fallback(rec, exc, dlq_topic))
            elif is_retriable(exc):
                pending.append(rec)
                retriable = exc
            else:
                raise FatalProduceError(
                    f"producing to {rec.topic} failed: {type(exc).__name__}: {exc}"
                ) from exc
        if retriable is not None:
            if give_up():
                raise DrainTimeout(f"{len(pending)} records not acknowledged: {retriable!r}")
            log.warning(
                "retriable produce failure (%s: %s); retrying %d records in %.1fs",
                type(retriable).__name__,
                retriable,
                len(pending),
                delay,
            )
            await sleep(delay)
            delay = min(delay * 2, backoff_max)
