"""Outbox rows Kafka refuses for good: each is published as a DLQ record instead.

Convention 15: a row that no retry can publish (larger than the producer's
``max_request_size`` or the topic's ``max.message.bytes``, a topic name Kafka cannot
accept) must not end every relay term for ever, holding back every row after it. It is
published as a DLQ record in the same transaction, in its place, and counted
(``pipeline_dlq_messages_total{component="relay"}``) once that transaction commits.

Kafka gives its verdict in one of two ways:

* the client's, at once: ``send()`` raises (the record is larger than the producer's
  ``max_request_size``). Nothing was queued, so the transaction goes on: the relay
  sends the row's next form (:class:`Stage`) at once;
* the broker's, through the send's future (larger than the topic's
  ``max.message.bytes``). The broker refuses a whole *batch*, so every record that
  shared the batch fails too, and the transaction must be aborted (the producer's
  sequence numbers for the partition no longer match the broker's, so the relay's
  term ends and a new producer starts, as for any other failure). What was learned is
  kept here, across the abort: the rows whose futures failed are *suspects*, sent the
  next time each in a batch of its own, so each gets its own verdict; a row refused
  alone is refused for good, and the time after that it is sent as its DLQ record.

Each refusal moves one row one :class:`Stage` on, and each stage is tried once, so a
refused row costs at most a few aborted transactions, never a loop. The knowledge is
this process's only: a relay that takes over learns it again the same way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import IntEnum

from aiokafka.errors import (
    InvalidTimestampError,
    InvalidTopicError,
    MessageSizeTooLargeError,
    RecordListTooLargeError,
    RecordTooLargeError,
    UnsupportedForMessageFormatError,
)

from pipeline.kafka import H_HEADERS_OMITTED, H_VALUE_OMITTED
from pipeline.metrics import DLQ_MESSAGES, start_at_zero
from relay.outbox import Position, Row
from schemas.errors import IngestError

COMPONENT = "relay"  # dlq_component, and the component label of the DLQ counter

# DLQ reasons (dlq_reason): stable, documented in docs/kafka.md (the outbox relay).
R_OUTBOX_TOO_LARGE = "outbox_too_large"  # the producer or the topic refused its size
R_OUTBOX_REFUSED = "outbox_refused"  # refused for good otherwise (the class in dlq_detail)
DLQ_REASONS = (R_OUTBOX_TOO_LARGE, R_OUTBOX_REFUSED)

# Where the original lives: the outbox row's id (its dedupe id, the task id for an emit).
# The record never had a partition or offset, so there are no dlq_source_partition/offset.
H_OUTBOX_ID = "dlq_source_outbox_id"

_TOO_LARGE = (MessageSizeTooLargeError, RecordTooLargeError, RecordListTooLargeError)
# Refusals about the record itself, which no retry changes. Not here, on purpose: the
# retriable errors (a missing topic: UnknownTopicOrPartition; a broker away), the
# producer's own state (fenced, out of sequence) and authorization, which an operator
# fixes for every row at once: those end the term, and the next one tries again.
_REFUSED = (InvalidTopicError, InvalidTimestampError, UnsupportedForMessageFormatError)

# Kafka's rule for topic names (org.apache.kafka.common.internals.Topic.validate).
_TOPIC = re.compile(r"[a-zA-Z0-9._-]{1,249}")


def start_metrics_at_zero() -> None:
    """The relay's DLQ series, at 0 from the start (convention 11)."""
    start_at_zero(DLQ_MESSAGES, component=[COMPONENT], reason=DLQ_REASONS)


def reason_for(exc: BaseException) -> str | None:
    """The DLQ reason when ``exc`` refuses one record for good, else None."""
    if isinstance(exc, _TOO_LARGE):
        return R_OUTBOX_TOO_LARGE
    if isinstance(exc, _REFUSED):
        return R_OUTBOX_REFUSED
    return None


def topic_error(topic: str) -> InvalidTopicError | None:
    """The error Kafka would give, sooner or later, for a topic name it cannot accept
    (aiokafka only waits for its metadata until the request times out)."""
    if _TOPIC.fullmatch(topic) and topic not in (".", ".."):
        return None
    return InvalidTopicError(f"{topic!r} is not a legal Kafka topic name")


class Stage(IntEnum):
    """What the relay sends for a row, in order; each refusal moves the row one on."""

    BATCHED = 0  # the row, batched with the others (every row starts here)
    ALONE = 1  # the row, in a batch of its own: a suspect, to get its own verdict
    DLQ = 2  # its DLQ record: key, value and headers kept
    DLQ_NO_VALUE = 3  # its DLQ record without the value (dlq_value_omitted)
    DLQ_BARE = 4  # its DLQ record without value, key or the row's headers


class Unpublishable(IngestError):
    """Even the barest DLQ record of a row was refused: the DLQ topic itself is wrong
    (missing rights, a tiny ``max.message.bytes``). Ends the term, as any error does."""


@dataclass(frozen=True)
class Refused:
    stage: Stage
    reason: str = ""  # set once the row itself is refused for good (stage >= DLQ)
    detail: str = ""


@dataclass(frozen=True)
class Record:
    topic: str
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes]]


def dlq_headers(row: Row, reason: str, detail: str) -> list[tuple[str, bytes]]:
    """The row's headers (minus any ``dlq_*``) plus the DLQ headers of the project
    (``pipeline.kafka``), with the outbox row for the source coordinates."""
    kept = [(k, v) for k, v in row.headers if not k.startswith("dlq_")]
    return kept + [
        ("dlq_reason", reason.encode()),
        ("dlq_detail", detail.encode("utf-8", "replace")[:1024]),
        ("dlq_component", COMPONENT.encode()),
        ("dlq_source_topic", row.topic.encode("utf-8", "replace")),
        (H_OUTBOX_ID, row.id.encode()),
        ("dlq_attempt", b"1"),
    ]


class Refusals:
    """What this relay learned about the rows Kafka refused, kept across aborted
    transactions and terms until a commit takes the rows past them."""

    def __init__(self) -> None:
        self._rows: dict[tuple[Position, str], Refused] = {}

    def __len__(self) -> int:
        return len(self._rows)

    def get(self, row: Row) -> Refused:
        return self._rows.get((row.position, row.id), Refused(Stage.BATCHED))

    def stage(self, row: Row) -> Stage:
        return self.get(row).stage

    def refused(self, row: Row, exc: BaseException, *, alone: bool) -> Refused:
        """Kafka refused what was sent for ``row`` at its stage with ``exc`` (for which
        :func:`reason_for` is not None); ``alone``: the verdict is the record's own (the
        client's, or the broker's on a batch of one). Returns the row's next stage;
        raises :class:`Unpublishable` after the last."""
        now = self.get(row)
        detail = f"{type(exc).__name__}: {exc}"
        if now.stage >= Stage.DLQ:  # the DLQ record was refused: the next, smaller one
            if now.stage == Stage.DLQ_BARE:
                raise Unpublishable(
                    f"the DLQ refused even the bare record of outbox row {row.id!r}: {detail}"
                ) from exc
            nxt = Refused(Stage(now.stage + 1), now.reason, now.detail)
        elif alone or now.stage == Stage.ALONE:
            nxt = Refused(Stage.DLQ, reason_for(exc) or R_OUTBOX_REFUSED, detail)
        else:  # the broker refused a batch it was in: find out whether it was this row
            nxt = Refused(Stage.ALONE)
        self._rows[(row.position, row.id)] = nxt
        return nxt

    def forget_through(self, pos: Position) -> None:
        """Rows at or before ``pos`` are committed: nothing more to remember of them."""
        self._rows = {k: v for k, v in self._rows.items() if k[0] > pos}


def record(row: Row, refused: Refused, dlq_topic: str) -> Record:
    """What to send for ``row`` at its stage."""
    if refused.stage < Stage.DLQ:
        return Record(row.topic, row.key, row.body, row.headers)
    headers = dlq_headers(row, refused.reason, refused.detail)
    if refused.stage == Stage.DLQ:
        return Record(dlq_topic, row.key, row.body, headers)
    # A record needs a key or a value: the outbox id stands in for a key the row lacks.
    if refused.stage == Stage.DLQ_NO_VALUE:
        key = row.key if row.key is not None else row.id.encode()
        return Record(dlq_topic, key, None, [*headers, (H_VALUE_OMITTED, b"1")])
    bare = [h for h in headers if h[0].startswith("dlq_")]
    omitted = [(H_VALUE_OMITTED, b"1"), (H_HEADERS_OMITTED, b"1")]
    return Record(dlq_topic, row.id.encode(), None, [*bare, *omitted])
