"""aiokafka clients built from settings, the one fetch every consumer loop uses, and the
dead-letter record format.

:func:`getmany` is ``consumer.getmany`` for every consumer loop here (ingress, router,
replay, DLQ re-drive): a fetched record batch that cannot be decoded (a codec this
install lacks, a bad CRC, corrupt compressed bytes) becomes :class:`UndecodableBatch`,
which names the topic, partition and offset. Each process turns it into one log line
and a non-zero exit, without committing past it: the batch is never skipped, and
the next start reads it again.

A DLQ record keeps the original key and value byte-for-byte (nothing is lost)
and adds headers:

* ``dlq_reason``: a stable machine string (see ``schemas.envelope.R_*``)
* ``dlq_detail``: a human explanation (truncated to 1 KiB)
* ``dlq_component``: ``ingress`` or ``router``
* ``dlq_source_topic`` / ``dlq_source_partition`` / ``dlq_source_offset``
* ``dlq_attempt``: 1 on first dead-lettering, +1 each time ``replay --dlq`` fails again
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Sequence
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka import errors as aiokafka_errors
from aiokafka.errors import (
    CorruptRecordException,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    MessageSizeTooLargeError,
    RecordTooLargeError,
    RequestTimedOutError,
    UnsupportedCodecError,
)
from aiokafka.structs import ConsumerRecord, TopicPartition

from pipeline.settings import KafkaSettings
from schemas.errors import IngestError

DLQ_PREFIX = "dlq_"


def key_partition(key: bytes, partitions: int) -> int:
    """The partition of a keyed message in every producer of this project: CRC-32 of the key.

    aiokafka's default partitioner is murmur2 in pure Python, about a fifth of
    ingress's CPU per event; ``zlib.crc32`` runs in C. What matters is only that
    one key always maps to one partition, so all producers built here (ingress,
    replay re-drive, emit tasks) use this function, and ingress passes the
    partition explicitly, skipping the client's partitioner altogether.
    """
    return zlib.crc32(key) % partitions


def is_retriable(exc: BaseException) -> bool:
    """A Kafka error that retrying can fix: broker away, leader moving, request timed out.

    aiokafka marks retriability on the error class; connection and timeout errors
    are retriable whatever their flag says.
    """
    if isinstance(exc, KafkaTimeoutError | KafkaConnectionError | RequestTimedOutError):
        return True
    return isinstance(exc, KafkaError) and bool(exc.retriable)


def is_too_large(exc: BaseException) -> bool:
    """Kafka refused the record for its size (the client's max request, or the topic's
    ``max.message.bytes``): sending it again cannot help."""
    return isinstance(exc, MessageSizeTooLargeError | RecordTooLargeError)


# Header of a DLQ record sent without its value because Kafka refused it with the value:
# its dlq_source_* headers say where the original lives.
H_VALUE_OMITTED = "dlq_value_omitted"
# ... and without the producer's key and headers too (only the dlq_* ones are left).
H_HEADERS_OMITTED = "dlq_headers_omitted"


def _partitioner(key: bytes | None, all_partitions: Sequence[int], available: Sequence[int]) -> int:
    if key is None:
        return random.choice(list(available or all_partitions))
    ordered = sorted(all_partitions)
    return ordered[key_partition(key, len(ordered))]


def producer(cfg: KafkaSettings, **overrides: Any) -> AIOKafkaProducer:
    """An idempotent producer with ``acks=all``: no loss, no broker-side duplicates.

    Its batches are compressed with ``KAFKA_COMPRESSION_TYPE`` (none by default)."""
    kw: dict[str, Any] = {
        **cfg.client_kwargs(),
        "compression_type": cfg.compression(),
        "acks": "all",
        "enable_idempotence": True,
        "linger_ms": 5,
        "max_batch_size": 256 * 1024,
        "partitioner": _partitioner,
    }
    kw.update(overrides)
    return AIOKafkaProducer(**kw)


class FencedInstanceId(aiokafka_errors.BrokerResponseError, IngestError):  # type: ignore[misc]
    """Error 82, FENCED_INSTANCE_ID: another member of the group has this member's
    ``group.instance.id`` (what aiokafka's join raises names this class through ``repr``)."""

    errno = 82
    message = "FENCED_INSTANCE_ID"
    description = (
        "another process of this consumer group joined with the same KAFKA_GROUP_INSTANCE_ID;"
        " give every process of a group its own (e.g. its StatefulSet pod name)"
    )

    def __repr__(self) -> str:
        return f"{self.message}: {self.description}"


def consumer(
    cfg: KafkaSettings, *topics: str, group_id: str | None, **overrides: Any
) -> AIOKafkaConsumer:
    """A manual-commit consumer (offsets are committed only after the durable step).

    With ``KAFKA_GROUP_INSTANCE_ID`` set, a consumer in a group is a static member
    (KIP-345): on stop it does not leave the group, and when it comes back with the same
    id within its session timeout (``session_timeout_ms``, aiokafka's 10 s unless
    overridden) it gets its partitions back without a rebalance; only after the session
    timeout does the broker remove it and reassign its partitions. The id is scoped to a
    group, so ingress and router may share one. Two live processes of one group with the
    same id fence each other: aiokafka sends no instance id in heartbeats, so the fenced
    one hears "member_id was not recognized", rejoins, and fences the other in turn; both
    keep taking the same partitions every few seconds. A join answered FENCED_INSTANCE_ID
    stops the consumer with :class:`FencedInstanceId`'s message, which names the variable
    (docs/kafka.md#static-group-membership; tests/integration/test_static_membership.py).
    """
    kw: dict[str, Any] = {
        **cfg.client_kwargs(),
        "group_id": group_id,
        "enable_auto_commit": False,
        "auto_offset_reset": "earliest",
        "isolation_level": "read_committed",
        "max_poll_records": 500,
        "fetch_min_bytes": cfg.fetch_min_bytes,
        "fetch_max_wait_ms": cfg.fetch_max_wait_ms,
    }
    if group_id is not None and cfg.group_instance_id is not None:
        kw["group_instance_id"] = cfg.group_instance_id
        # aiokafka 0.14 knows no error 82 (FENCED_INSTANCE_ID): it would stop the consumer
        # with "KafkaError: UnknownError()". Registered, the same failure names its cause.
        aiokafka_errors.kafka_errors.setdefault(82, FencedInstanceId)
    kw.update(overrides)
    return AIOKafkaConsumer(*topics, **kw)


class UndecodableBatch(IngestError):
    """A fetched record batch this process cannot decode: fatal, never skipped.

    ``offset`` is the first offset of the partition not yet handed to the loop (the
    batch's first offset, or where the consumer stood inside it). Nothing at or after
    it was processed, so nothing past it is committed: after the cause is fixed (e.g.
    the codec installed), a restart reads the batch again.
    """

    def __init__(self, tp: TopicPartition | None, offset: int | None, cause: BaseException):
        self.tp, self.offset, self.cause = tp, offset, cause
        where = (
            f"{tp.topic} partition {tp.partition} offset {offset if offset is not None else '?'}"
            if tp is not None
            else "an unknown partition (aiokafka's error did not say which)"
        )
        hint = (
            " (install the codec libraries: aiokafka[lz4,snappy,zstd])"
            if isinstance(cause, UnsupportedCodecError)
            else ""
        )
        name, text = type(cause).__name__, str(cause)
        reason = text if text.startswith(name) else f"{name}: {text}"  # aiokafka's say theirs
        super().__init__(
            f"cannot decode the record batch at {where}: {reason}{hint};"
            " nothing from it on is processed or committed"
        )


# What aiokafka raises for a batch it cannot decode. Other errors raised while it
# unpacks a batch (cramjam's DecompressionError on corrupt bytes) are found by where
# they were raised: see _unpacking.
DECODE_ERRORS = (UnsupportedCodecError, CorruptRecordException)


def _unpacking(exc: BaseException) -> tuple[TopicPartition, int | None] | None:
    """The partition and offset whose batch aiokafka was unpacking when ``exc`` was raised.

    aiokafka's decode errors carry no coordinates: the batch decoder does not know its
    partition. The fetcher's unpacking generator (``PartitionRecords._unpack_records``,
    which ``getmany`` drives) does: its locals hold the partition and the next offset
    to return, and its frame is on the traceback. None when it is not there.
    """
    tb = exc.__traceback__
    while tb is not None:
        frame = tb.tb_frame
        if frame.f_code.co_name == "_unpack_records":
            tp = frame.f_locals.get("tp")
            records = frame.f_locals.get("self")
            if isinstance(tp, TopicPartition):
                offset = getattr(records, "next_fetch_offset", None)
                return tp, offset if isinstance(offset, int) else None
        tb = tb.tb_next
    return None


async def getmany(
    consumer: AIOKafkaConsumer,
    *partitions: TopicPartition,
    timeout_ms: int,
    max_records: int | None = None,
) -> dict[TopicPartition, list[ConsumerRecord]]:
    """``consumer.getmany``; a batch that cannot be decoded raises :class:`UndecodableBatch`.

    Without this, aiokafka raises the bare decode error, which names no partition, and
    a retrying caller would meet the same batch again on every fetch.
    """
    try:
        return await consumer.getmany(*partitions, timeout_ms=timeout_ms, max_records=max_records)
    except Exception as exc:
        where = _unpacking(exc)
        if where is None and not isinstance(exc, DECODE_ERRORS):
            raise
        tp, offset = where if where is not None else (None, None)
        raise UndecodableBatch(tp, offset, exc) from exc


def header(headers: Any, name: str) -> bytes | None:
    for k, v in headers or ():
        if k == name:
            return bytes(v) if v is not None else None
    return None


def record_bytes(rec: Any) -> int:
    """What a record (a ConsumerRecord, or ingress's Outgoing) weighs: its key, value,
    header names (UTF-8) and header values."""
    size = len(rec.value or b"") + len(rec.key or b"")
    for name, value in rec.headers or ():
        size += len(name.encode("utf-8", "surrogatepass")) + len(value or b"")
    return size


def dlq_key(msg: ConsumerRecord) -> bytes | None:
    """The key of ``msg``'s DLQ copy: its own, or, for a record with neither key nor value
    (librdkafka produces one; aiokafka refuses to), its coordinates ``topic/partition@offset``."""
    if msg.key is not None or msg.value is not None:
        return msg.key  # type: ignore[no-any-return]
    return f"{msg.topic}/{msg.partition}@{msg.offset}".encode()


def dlq_headers(
    msg: ConsumerRecord, reason: str, detail: str, component: str, *, redrive: bool = False
) -> list[tuple[str, bytes]]:
    """Original headers (minus earlier dlq_* ones) plus this dead-lettering's headers.

    ``redrive``: ``msg`` was read from the DLQ topic itself (a re-drive that failed
    again): its ``dlq_source_*`` coordinates and ``dlq_attempt`` are the project's own
    and are kept. Anywhere else a ``dlq_*`` header is whatever a producer wrote (the
    fuzzer's records spoofed them), so the coordinates are the record's own.
    """
    attempt = 1
    if redrive:
        prior = header(msg.headers, "dlq_attempt")
        try:
            attempt = int(prior) + 1 if prior else 1
        except ValueError:
            attempt = 1
    own = (msg.topic.encode(), str(msg.partition).encode(), str(msg.offset).encode())
    src_topic, src_part, src_off = own
    if redrive:  # the first source coordinates, when a re-driven message fails again
        src_topic = header(msg.headers, "dlq_source_topic") or src_topic
        src_part = header(msg.headers, "dlq_source_partition") or src_part
        src_off = header(msg.headers, "dlq_source_offset") or src_off
    kept: list[tuple[str, bytes]] = []
    for k, v in msg.headers or ():
        if isinstance(k, str) and not k.startswith(DLQ_PREFIX):
            kept.append((k, bytes(v or b"")))
    return kept + [
        ("dlq_reason", reason.encode()),
        ("dlq_detail", detail.encode("utf-8", "replace")[:1024]),
        ("dlq_component", component.encode()),
        ("dlq_source_topic", src_topic),
        ("dlq_source_partition", src_part),
        ("dlq_source_offset", src_off),
        ("dlq_attempt", str(attempt).encode()),
    ]
