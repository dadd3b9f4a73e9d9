"""A peek at the dead-letter topic: the newest messages, by reason. Commits nothing.

The consumer has no group: partitions are assigned by hand and read from
``end - limit`` to the end offsets taken at the start, so a peek neither moves
``replay --dlq``'s progress group nor waits for new messages. A partition whose
record batch this process cannot decode (a codec library missing) is reported in
``undecodable`` with its offset and cause, and the other partitions are still shown.
"""

from __future__ import annotations

import base64
from collections import Counter
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.structs import ConsumerRecord

from pipeline import kafka
from pipeline.settings import KafkaSettings
from replay.session import ReplayError, topic_partitions

_MAX_VALUE = 4096  # bytes of each value shown


def _text(value: bytes | None) -> str | None:
    return None if value is None else value.decode("utf-8", "replace")


def describe(msg: ConsumerRecord) -> dict[str, Any]:
    headers = {k: _text(bytes(v)) if v is not None else None for k, v in msg.headers or ()}
    value = bytes(msg.value or b"")
    try:
        shown: dict[str, Any] = {"value": value[:_MAX_VALUE].decode("utf-8")}
    except UnicodeDecodeError:
        shown = {"value_base64": base64.b64encode(value[:_MAX_VALUE]).decode()}
    return {
        "partition": msg.partition,
        "offset": msg.offset,
        "timestamp_ms": msg.timestamp,
        "reason": headers.get("dlq_reason"),
        "detail": headers.get("dlq_detail"),
        "component": headers.get("dlq_component"),
        "attempt": headers.get("dlq_attempt"),
        "key": _text(msg.key),
        "value_bytes": len(value),
        "truncated": len(value) > _MAX_VALUE,
        "headers": headers,
        **shown,
    }


async def peek(cfg: KafkaSettings, reason: str | None, limit: int) -> dict[str, Any]:
    """The newest ``limit`` messages per partition (``reason`` filters), newest first."""
    topic = cfg.dlq_topic
    consumer = kafka.consumer(cfg, group_id=None)
    await consumer.start()
    try:
        try:
            parts = [TopicPartition(topic, p) for p in await topic_partitions(consumer, topic)]
        except ReplayError:
            return {"topic": topic, "scanned": 0, "by_reason": {}, "messages": []}
        consumer.assign(parts)
        begin = await consumer.beginning_offsets(parts)
        end = await consumer.end_offsets(parts)
        for tp in parts:
            consumer.seek(tp, max(begin[tp], end[tp] - limit))
        pending = {tp for tp in parts if end[tp] > max(begin[tp], end[tp] - limit)}
        got, undecodable = await read_until(consumer, pending, end)
    finally:
        await consumer.stop()
    shown = [describe(m) for m in got]
    counts = Counter(m["reason"] or "unknown" for m in shown)
    if reason is not None:
        shown = [m for m in shown if m["reason"] == reason]
    shown.sort(key=lambda m: (m["timestamp_ms"] or 0, m["partition"], m["offset"]), reverse=True)
    out = {"topic": topic, "scanned": len(got), "by_reason": dict(counts), "messages": shown}
    if undecodable:
        out["undecodable"] = undecodable
    return out


async def read_until(
    consumer: AIOKafkaConsumer, pending: set[TopicPartition], end: dict[TopicPartition, int]
) -> tuple[list[ConsumerRecord], list[dict[str, Any]]]:
    """Read ``pending`` up to ``end``; a partition whose batch cannot be decoded stops there.

    Returns the records read and, per undecodable partition, ``{partition, offset,
    cause}``. When aiokafka does not say which partition failed, reading stops.
    """
    got: list[ConsumerRecord] = []
    undecodable: list[dict[str, Any]] = []
    while pending:
        try:
            batch = await kafka.getmany(consumer, *pending, timeout_ms=1000)
        except kafka.UndecodableBatch as exc:
            undecodable.append(
                {
                    "partition": exc.tp.partition if exc.tp is not None else None,
                    "offset": exc.offset,
                    "cause": str(exc),
                }
            )
            if exc.tp is None:
                break
            pending.discard(exc.tp)
            continue
        if not batch:
            break  # nothing more arrives below the end offsets (e.g. aborted records)
        for tp, msgs in batch.items():
            got += [m for m in msgs if m.offset < end[tp]]
            if msgs and msgs[-1].offset + 1 >= end[tp]:
                pending.discard(tp)
    return got, undecodable
