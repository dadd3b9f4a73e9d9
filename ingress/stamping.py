"""How ingress gives an event without an ``event_id`` a stable one.

The idempotency contract needs every event to carry an id that is the same on
every delivery of the same raw message: the router derives the workflow id
``activity-{activity_id}:{event_id}`` from it, and Temporal rejects the second
start. A ``uuid4()`` assigned at run time would differ after a crash and a
redelivery, so it is never used. The strategies:

* ``source`` (default): UUIDv5 of the raw message's Kafka coordinates
  (topic, partition, offset). Stable under redelivery; two producers sending the
  same payload twice get two ids (they are two messages).
* ``content``: UUIDv5 of the key and value bytes. Collapses byte-identical
  resends by a producer into one event; two genuinely separate but identical
  events collapse too, so only use it when that is what the producer means.
* ``header:NAME``: the producer's own id in Kafka header ``NAME``. A message
  without that header (or with an empty or non-UTF-8 one) goes to the DLQ with
  reason ``missing_event_id_header``: silently falling back to another strategy
  would mint ids the producer never asked for and could not reproduce.

An event that already has an id keeps it whatever the strategy, and counts as
strategy ``existing``: our ``event_id`` untouched, or a CloudEvent's, which the
parser derives from its ``source`` + ``id`` (:func:`schemas.ids.cloudevent_event_id`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from aiokafka.structs import ConsumerRecord

from pipeline.kafka import header
from schemas.envelope import R_BAD_ID, Envelope, id_problem
from schemas.errors import IngestError
from schemas.ids import content_event_id, source_event_id, source_event_id_of

R_MISSING_EVENT_ID_HEADER = "missing_event_id_header"
EXISTING = "existing"


class StampError(IngestError):
    """The message cannot be given an id; ``reason`` is the DLQ reason."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


class Strategy(Protocol):
    """Derives an id from a raw message. ``label`` is the metric label value."""

    @property
    def label(self) -> str: ...

    def derive(self, msg: ConsumerRecord) -> str: ...


@dataclass(frozen=True)
class SourceStrategy:
    label: str = "source"

    def derive(self, msg: ConsumerRecord) -> str:
        return source_event_id(msg.topic, msg.partition, msg.offset)


@dataclass(frozen=True)
class ContentStrategy:
    label: str = "content"

    def derive(self, msg: ConsumerRecord) -> str:
        return content_event_id(msg.key, msg.value or b"")


@dataclass(frozen=True)
class HeaderStrategy:
    name: str
    # One label for all header names keeps the metric's cardinality bounded.
    label: str = "header"

    def derive(self, msg: ConsumerRecord) -> str:
        raw = header(msg.headers, self.name)
        if raw is None:
            raise StampError(R_MISSING_EVENT_ID_HEADER, f"no Kafka header {self.name!r}")
        try:
            value = raw.decode("utf-8").strip()
        except UnicodeDecodeError:
            raise StampError(
                R_MISSING_EVENT_ID_HEADER, f"Kafka header {self.name!r} is not UTF-8"
            ) from None
        if not value:
            raise StampError(R_MISSING_EVENT_ID_HEADER, f"Kafka header {self.name!r} is empty")
        problem = id_problem(value)
        if problem is not None:  # the same edge check as an event_id in the body
            raise StampError(R_BAD_ID, f"Kafka header {self.name!r} {problem}")
        return value


def strategy_from_string(spec: str) -> Strategy:
    """``source`` | ``content`` | ``header:NAME``; raises ValueError otherwise."""
    spec = spec.strip()
    if spec == "source":
        return SourceStrategy()
    if spec == "content":
        return ContentStrategy()
    if spec.startswith("header:"):
        name = spec.removeprefix("header:").strip()
        if not name:
            raise ValueError("strategy 'header:NAME' needs a header name")
        return HeaderStrategy(name)
    raise ValueError(f"unknown stamping strategy {spec!r} (source, content, header:NAME)")


def stamp(env: Envelope, msg: ConsumerRecord, strategy: Strategy) -> tuple[Envelope, str]:
    """The envelope with an id, and the label it counts under (``existing`` if kept)."""
    if env.event_id:
        return env, EXISTING
    return env.with_event_id(strategy.derive(msg)), strategy.label


def coordinates_deriver(strategy: Strategy) -> Callable[[bytes], str] | None:
    """For the ``source`` strategy, the id from ``b"{topic}/{partition}/{offset}"``
    (ingress forms those bytes anyway, for its header); None for the others."""
    return source_event_id_of if type(strategy) is SourceStrategy else None
