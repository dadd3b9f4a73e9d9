"""A peek at the dead-letter topic: the newest messages, by reason. Commits nothing.

The consumer has no group: partitions are assigned by hand and read below the end
offsets taken at the start, so a peek neither moves ``replay --dlq``'s progress group
nor waits for new messages. A partition whose record batch this process cannot decode
(a codec library missing) is reported in ``undecodable`` with its offset and cause, and
the other partitions are still shown.

Bounds are in bytes as well as messages (DESIGN convention 16, issue 34): a DLQ record
carries its original headers, and 300 records with 900 KB headers made every console
refresh read and serve 270 MB. So:

* the read goes newest first, per partition in chunks from the end offset back to
  ``limit`` messages, round-robin over the partitions, and stops once it has read
  ``read_max_bytes`` of records (keys, values, header names and values; the chunk size
  follows the biggest record seen, and a chunk stops at the record that reaches the
  budget);
* each message is summarized as it is read (the record itself is dropped): its value,
  key, DLQ fields and header names are truncated, header values are left out;
* the answer holds the newest messages that fit in ``max_bytes`` of JSON, and says how
  many were left unread (``not_read``) or unshown (``not_shown``) and whether the budget
  stopped it (``stopped_early``).

One record's header values are shown on demand (:func:`record`), each truncated like a
value, within the same ``max_bytes``.
"""

from __future__ import annotations

import base64
import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.structs import ConsumerRecord

from pipeline import kafka
from pipeline.kafka import record_bytes
from pipeline.settings import KafkaSettings
from replay.session import ReplayError, topic_partitions

_MAX_VALUE = 4096  # bytes of each value shown (and of each header value, on demand)
_MAX_KEY = 256  # bytes of each key shown
_MAX_NAME = 128  # bytes of each header name shown
_MAX_LISTED_HEADERS = 16  # header names (with their sizes) listed per message in a peek
# Bytes shown of the DLQ headers the peek shows as fields.
DLQ_FIELDS_MAX = {"dlq_reason": 128, "dlq_detail": 1024, "dlq_component": 64, "dlq_attempt": 32}
_MAX_REASONS = 50  # by_reason keeps the most frequent reasons; the rest count as OTHER
_MAX_CAUSE = 1024  # bytes of an undecodable partition's cause
_MAX_STEP = 500  # most offsets read per chunk
# The peek's consumer fetches small (a fetch still returns one whole batch at least): what
# a fetch brings past a chunk's end is dropped.
_PEEK_CONSUMER: dict[str, Any] = {"max_partition_fetch_bytes": 256 * 1024}
OTHER = "(other)"
# A UTF-8 character's length by its first byte: (length, (mask, bits)).
_UTF8_LEADS = ((2, (0xE0, 0xC0)), (3, (0xF0, 0xE0)), (4, (0xF8, 0xF0)))


@dataclass(frozen=True)
class Budget:
    """``max_bytes`` of JSON per answer, ``read_max_bytes`` of records read per peek."""

    max_bytes: int
    read_max_bytes: int


def json_bytes(obj: Any) -> int:
    """The size of ``obj`` as the API serves it (FastAPI's JSONResponse: compact UTF-8)."""
    return len(json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode())


def _cut(raw: bytes, cap: int) -> bytes:
    """The first ``cap`` bytes of ``raw``, less a UTF-8 character the cut split."""
    if len(raw) <= cap or cap <= 0:
        return raw[: max(cap, 0)]
    cut = raw[:cap]
    lead = len(cut) - 1
    while lead > 0 and len(cut) - lead < 4 and cut[lead] & 0xC0 == 0x80:
        lead -= 1  # back over continuation bytes (10xxxxxx) to the character's first byte
    first = cut[lead]
    need = next((n for n, lead_bits in _UTF8_LEADS if first & lead_bits[0] == lead_bits[1]), 1)
    return cut[:lead] if len(cut) - lead < need else cut


def _text(raw: bytes | None, cap: int) -> str | None:
    """The first ``cap`` bytes as text (bad UTF-8 replaced), for keys and DLQ fields."""
    return None if raw is None else _cut(bytes(raw), cap).decode("utf-8", "replace")


def _shown(raw: bytes, cap: int) -> dict[str, Any]:
    """``{"value": text}`` (UTF-8), else ``{"value_base64": ...}``, of the first ``cap`` bytes."""
    cut = _cut(raw, cap)
    try:
        return {"value": cut.decode("utf-8")}
    except UnicodeDecodeError:
        return {"value_base64": base64.b64encode(raw[:cap]).decode()}


def _header(name: str, value: bytes | None, with_value: bool) -> dict[str, Any]:
    raw_name = name.encode()
    out: dict[str, Any] = {"name": _text(raw_name, _MAX_NAME), "bytes": len(value or b"")}
    if len(raw_name) > _MAX_NAME:
        out["name_truncated"] = True
    if with_value:
        if value is None:
            out["value"] = None
        else:
            out["truncated"] = len(value) > _MAX_VALUE
            out.update(_shown(value, _MAX_VALUE))
    return out


def describe(msg: ConsumerRecord, *, header_values: bool = False) -> dict[str, Any]:
    """One message as a peek shows it: every field truncated, header values only when
    ``header_values`` (then all headers, each value truncated; :func:`record` trims
    them to the budget)."""
    headers = [(k, bytes(v) if v is not None else None) for k, v in msg.headers or ()]
    fields: dict[str, str | None] = dict.fromkeys(DLQ_FIELDS_MAX)
    for k, v in headers:
        if k in fields and fields[k] is None and v is not None:
            fields[k] = _text(v, DLQ_FIELDS_MAX[k])
    value = bytes(msg.value or b"")
    key = None if msg.key is None else bytes(msg.key)
    listed = headers if header_values else headers[:_MAX_LISTED_HEADERS]
    return {
        "partition": msg.partition,
        "offset": msg.offset,
        "timestamp_ms": msg.timestamp,
        "reason": fields["dlq_reason"],
        "detail": fields["dlq_detail"],
        "component": fields["dlq_component"],
        "attempt": fields["dlq_attempt"],
        "key": _text(key, _MAX_KEY),
        "key_bytes": None if key is None else len(key),
        "key_truncated": key is not None and len(key) > _MAX_KEY,
        "value_bytes": len(value),
        "truncated": len(value) > _MAX_VALUE,
        "header_count": len(headers),
        "header_bytes": sum(len(k.encode()) + len(v or b"") for k, v in headers),
        "headers": [_header(k, v, header_values) for k, v in listed],
        **_shown(value, _MAX_VALUE),
    }


@dataclass
class Read:
    """What a newest-first read found."""

    messages: list[dict[str, Any]] = field(default_factory=list)  # described
    read_bytes: int = 0
    biggest: int = 0  # the biggest record read, in bytes
    not_read: int = 0  # offsets of the asked window left unread because of the budget
    undecodable: list[dict[str, Any]] = field(default_factory=list)

    def add(self, msg: ConsumerRecord) -> None:
        size = record_bytes(msg)
        self.read_bytes += size
        self.biggest = max(self.biggest, size)
        self.messages.append(describe(msg))


async def peek(
    cfg: KafkaSettings, reason: str | None, limit: int, budget: Budget
) -> dict[str, Any]:
    """The newest ``limit`` messages per partition (``reason`` filters), newest first,
    within ``budget``."""
    topic = cfg.dlq_topic
    consumer = kafka.consumer(cfg, group_id=None, **_PEEK_CONSUMER)
    await consumer.start()
    try:
        try:
            parts = [TopicPartition(topic, p) for p in await topic_partitions(consumer, topic)]
        except ReplayError:
            parts = []
        read = Read()
        if parts:
            consumer.assign(parts)
            begin = await consumer.beginning_offsets(parts)
            end = await consumer.end_offsets(parts)
            read = await read_newest(consumer, parts, begin, end, limit, budget.read_max_bytes)
    finally:
        await consumer.stop()
    return answer(topic, read, reason, budget.max_bytes)


def answer(topic: str, read: Read, reason: str | None, max_bytes: int) -> dict[str, Any]:
    """The peek's answer: the newest matching messages that fit in ``max_bytes``."""
    counts = Counter(m["reason"] or "unknown" for m in read.messages)
    by_reason = dict(counts.most_common(_MAX_REASONS))
    if len(counts) > _MAX_REASONS:
        by_reason[OTHER] = sum(counts.values()) - sum(by_reason.values())
    matching = [m for m in read.messages if reason is None or m["reason"] == reason]
    matching.sort(key=lambda m: (m["timestamp_ms"] or 0, m["partition"], m["offset"]), reverse=True)
    out: dict[str, Any] = {
        "topic": topic,
        "scanned": len(read.messages),
        "by_reason": by_reason,
        "max_bytes": max_bytes,
        "read_bytes": read.read_bytes,
        "stopped_early": False,  # the longer of false/true
        "not_read": read.not_read,
        "not_shown": len(matching),  # as many digits as it can need
        "messages": [],
    }
    if read.undecodable:
        out["undecodable"] = [
            {**u, "cause": _text(u["cause"].encode(), _MAX_CAUSE)} for u in read.undecodable
        ]
    shown = fit(matching, json_bytes(out), max_bytes)
    out["messages"] = shown
    out["not_shown"] = len(matching) - len(shown)
    out["stopped_early"] = out["not_shown"] > 0 or read.not_read > 0
    return out


def fit(items: list[dict[str, Any]], size: int, max_bytes: int) -> list[dict[str, Any]]:
    """The leading ``items`` that fit in ``max_bytes`` when added to a JSON list in an
    answer of ``size`` bytes (the first that does not fit ends the list: newest first)."""
    kept: list[dict[str, Any]] = []
    for item in items:
        more = json_bytes(item) + (1 if kept else 0)  # the comma
        if size + more > max_bytes:
            break
        kept.append(item)
        size += more
    return kept


async def read_newest(
    consumer: AIOKafkaConsumer,
    parts: list[TopicPartition],
    begin: dict[TopicPartition, int],
    end: dict[TopicPartition, int],
    limit: int,
    read_max_bytes: int,
) -> Read:
    """Read the newest ``limit`` records of each of ``parts`` (assigned), from ``end``
    back, until ``read_max_bytes`` of records are read.

    Round-robin, one chunk per partition per round: the first chunk is one record, the
    next ones at most twice the last and as many as the budget left holds of the
    biggest record seen. A partition whose batch cannot be decoded stops there and is
    reported; when aiokafka does not say which partition failed, reading stops.
    """
    read = Read()
    floor = {tp: max(begin[tp], end[tp] - limit) for tp in parts}
    hi = {tp: end[tp] for tp in parts}
    step = dict.fromkeys(parts, 1)
    active = [tp for tp in parts if hi[tp] > floor[tp]]
    consumer.pause(*parts)
    while active and read.read_bytes < read_max_bytes:
        for tp in list(active):
            if read.read_bytes >= read_max_bytes:
                break
            if read.biggest:
                room = (read_max_bytes - read.read_bytes) // (read.biggest * len(active))
                step[tp] = max(1, min(_MAX_STEP, 2 * step[tp], room))
            lo = max(floor[tp], hi[tp] - step[tp])
            try:
                stopped = await _read_range(consumer, tp, lo, hi[tp], read, read_max_bytes)
            except kafka.UndecodableBatch as exc:
                read.undecodable.append(
                    {
                        "partition": exc.tp.partition if exc.tp is not None else None,
                        "offset": exc.offset,
                        "cause": str(exc),
                    }
                )
                if exc.tp is None:
                    return read
                active.remove(tp)
                continue
            if stopped < hi[tp]:  # the budget ran out inside the chunk
                read.not_read += hi[tp] - stopped
            hi[tp] = lo
            if hi[tp] <= floor[tp]:
                active.remove(tp)
    read.not_read += sum(hi[tp] - floor[tp] for tp in active)
    return read


async def _read_range(
    consumer: AIOKafkaConsumer,
    tp: TopicPartition,
    lo: int,
    hi: int,
    read: Read,
    read_max_bytes: int,
) -> int:
    """Read ``tp`` from ``lo`` up to ``hi`` into ``read``; the offset where it stopped
    (``hi``: the whole range, or nothing more arrives below it, e.g. aborted records)."""
    consumer.seek(tp, lo)
    consumer.resume(tp)
    try:
        pos = lo
        while pos < hi:
            batch = await kafka.getmany(consumer, tp, timeout_ms=1000, max_records=hi - pos)
            msgs = batch.get(tp, [])
            if not msgs:
                return hi
            for msg in msgs:
                if msg.offset >= hi:
                    return hi
                read.add(msg)
                pos = msg.offset + 1
                if read.read_bytes >= read_max_bytes:
                    return pos
        return hi
    finally:
        consumer.pause(tp)
        # Drop what the fetch brought past ``hi``: aiokafka holds every fetch to the
        # broker back (prefetch_backoff, 100 ms) while a partition has unconsumed records.
        consumer.seek(tp, lo)


async def record(
    cfg: KafkaSettings, partition: int, offset: int, max_bytes: int
) -> dict[str, Any] | None:
    """One DLQ message with its header values (each truncated), within ``max_bytes``;
    None when the topic holds no message at ``partition``/``offset``."""
    topic = cfg.dlq_topic
    consumer = kafka.consumer(cfg, group_id=None, **_PEEK_CONSUMER)
    await consumer.start()
    try:
        try:
            if partition not in await topic_partitions(consumer, topic):
                return None
        except ReplayError:
            return None
        tp = TopicPartition(topic, partition)
        consumer.assign([tp])
        first = (await consumer.beginning_offsets([tp]))[tp]
        end = (await consumer.end_offsets([tp]))[tp]
        if not first <= offset < end:
            return None
        consumer.seek(tp, offset)
        batch = await kafka.getmany(consumer, tp, timeout_ms=5000, max_records=1)
        msgs = batch.get(tp, [])
        if not msgs or msgs[0].offset != offset:
            return None  # compacted away, or a transaction marker
        shown = describe(msgs[0], header_values=True)
    finally:
        await consumer.stop()
    headers = shown["headers"]
    out = {**shown, "headers": [], "stopped_early": False, "not_shown": len(headers)}
    kept = fit(headers, json_bytes(out), max_bytes)
    out["headers"] = kept
    out["not_shown"] = len(headers) - len(kept)
    out["stopped_early"] = out["not_shown"] > 0
    return out
