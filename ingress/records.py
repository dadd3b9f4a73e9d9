"""One raw message in, one outgoing record out: a stamped event or a DLQ record.

Pure functions (no Kafka I/O) so every branch is unit-testable. The service
sends what these return and commits a raw offset only once its record is
acknowledged.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, NamedTuple

from aiokafka.structs import ConsumerRecord

from ingress.stamping import EXISTING, StampError, Strategy, coordinates_deriver, stamp
from pipeline.kafka import DLQ_PREFIX, dlq_headers, dlq_key
from schemas.envelope import (
    NOT_PLAIN,
    EnvelopeError,
    decode_headers,
    encode,
    parse,
    plain_event_id,
    too_large,
    with_event_id_json,
)

if TYPE_CHECKING:
    from ingress.settings import IngressSettings
    from pipeline.settings import KafkaSettings

log = logging.getLogger(__name__)

COMPONENT = "ingress"
# Headers ingress adds to every stamped event (replacing any that came in).
H_STAMP = "ingress_stamp"  # the strategy that gave the id, or "existing"
H_SOURCE = "ingress_source"  # "{topic}/{partition}/{offset}" of the raw message
R_INTERNAL = "ingress_error"  # a bug in ingress, not in the input; logged with a traceback


class Outgoing(NamedTuple):
    """A record to produce for one raw message.

    ``reason`` is None for a stamped event and the DLQ reason otherwise;
    ``label`` is the ``pipeline_events_stamped_total`` strategy label of an event.
    A NamedTuple, not a frozen dataclass: one is built per event, and a frozen
    dataclass's ``__init__`` (an ``object.__setattr__`` per field) is several times
    dearer than a tuple's (figures: docs/benchmarks.md).
    """

    source: ConsumerRecord
    topic: str
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes]]
    reason: str | None = None
    label: str | None = None

    @property
    def tp(self) -> tuple[str, int]:
        return self.source.topic, self.source.partition


_OURS = (H_STAMP, H_SOURCE)
_RESERVED = DLQ_PREFIX  # dlq_* headers are the DLQ's own: a producer's never pass on
_new_tuple = tuple.__new__
# Larger bodies always take the full parse: the plain path's bracket count and the
# forwarded bytes (which may keep whitespace the full path would drop) stay small.
PLAIN_MAX_BYTES = 64 * 1024


@functools.cache
def _label_bytes(label: str) -> bytes:
    return label.encode()


def to_dlq(msg: ConsumerRecord, dlq_topic: str, reason: str, detail: str) -> Outgoing:
    """The original key and value byte-for-byte, plus the ``dlq_*`` headers."""
    return Outgoing(
        source=msg,
        topic=dlq_topic,
        key=dlq_key(msg),
        value=msg.value,
        headers=dlq_headers(msg, reason, detail, COMPONENT),
        reason=reason,
    )


def transform(
    msg: ConsumerRecord,
    *,
    strategy: Strategy,
    events_topic: str,
    dlq_topic: str,
    max_bytes: int,
) -> Outgoing:
    """Parse and stamp ``msg``; never raises (bad input becomes a DLQ record).

    The event keeps its raw record's key (:func:`event_key`): one entity's events,
    keyed by the entity, stay in one events partition in their raw order (flow.ordered
    runs them in that order). A record without a key is keyed by its ``event_id``.
    Either way every redelivery of one raw record has the same key, so it lands on the
    same events partition and the router sees duplicates in order, on one consumer.
    """
    return transform_all(
        (msg,), strategy=strategy, events_topic=events_topic, dlq_topic=dlq_topic,
        max_bytes=max_bytes,
    )[0]  # fmt: skip


def transform_all(
    msgs: Iterable[ConsumerRecord],
    *,
    strategy: Strategy,
    events_topic: str,
    dlq_topic: str,
    max_bytes: int,
) -> list[Outgoing]:
    """:func:`transform` of each message, in order.

    A *plain* body (:func:`schemas.envelope.plain_event_id`) skips the envelope and
    the re-serialising: the full path would write the same JSON document as the
    body plus ``event_id``, so the body is forwarded as is (it has an id) or with
    the stamped id spliced in as its first key; key, headers and label are the
    full path's. Everything else (CloudEvents, anything unusual, every malformed
    body) takes the full path. The plain path runs inline in this loop: a function
    call per message is a tenth of ingress's per-event budget.
    """
    out: list[Outgoing] = []
    append = out.append
    limit = min(max_bytes, PLAIN_MAX_BYTES)
    by_coordinates = coordinates_deriver(strategy)
    stamped_label, stamped_label_bytes = strategy.label, _label_bytes(strategy.label)
    existing_label_bytes = _label_bytes(EXISTING)
    for msg in msgs:
        try:
            value = msg.value
            hdrs = decode_headers(msg.headers) if msg.headers else ()
            plain, event_id = (
                plain_event_id(value)
                if value is not None
                and len(value) <= limit
                and not (hdrs and any(n.startswith("ce_") for n, _ in hdrs))
                else NOT_PLAIN
            )
            if not plain:
                append(_full(msg, strategy, events_topic, max_bytes))
                continue
            coordinates = f"{msg.topic}/{msg.partition}/{msg.offset}".encode()
            if event_id is None:
                if by_coordinates is not None:
                    event_id = by_coordinates(coordinates)
                else:
                    event_id = strategy.derive(msg)
                label, label_bytes = stamped_label, stamped_label_bytes
                value = with_event_id_json(value, event_id)
                if len(value) > max_bytes:  # the router's limit applies to what leaves
                    raise too_large(len(value), max_bytes, "stamped")
            else:
                label, label_bytes = EXISTING, existing_label_bytes
            headers = (
                [(k, v) for k, v in hdrs if k not in _OURS and not k.startswith(_RESERVED)]
                if hdrs
                else []
            )
            headers.append((H_STAMP, label_bytes))
            headers.append((H_SOURCE, coordinates))
            # Outgoing(...) without its Python-level __new__ (no argument parsing per event).
            key = msg.key if msg.key is not None else event_id.encode()
            append(_new_tuple(Outgoing, (msg, events_topic, key, value, headers,
                                         None, label)))  # fmt: skip
        except (EnvelopeError, StampError) as exc:
            append(to_dlq(msg, dlq_topic, exc.reason, exc.detail))
        except Exception as exc:  # a bug must not stall the partition: park the message
            log.exception(
                "unexpected error on %s/%d@%d; sending it to the DLQ",
                msg.topic,
                msg.partition,
                msg.offset,
            )
            append(to_dlq(msg, dlq_topic, R_INTERNAL, f"{type(exc).__name__}: {exc}"))
    return out


def _full(msg: ConsumerRecord, strategy: Strategy, events_topic: str, max_bytes: int) -> Outgoing:
    """The full path: parse into an envelope, stamp, serialise (raises what parse/stamp raise)."""
    # Serialised once, after stamping; encode() raises what parse() would check.
    env = parse(msg.value, msg.headers, max_bytes=max_bytes, check_serialisable=False)
    env, label = stamp(env, msg, strategy)
    value = encode(env)
    if len(value) > max_bytes:  # stamping and re-serialising can grow it past the router's limit
        raise too_large(len(value), max_bytes, "stamped")
    assert env.event_id is not None
    headers = (
        [(k, v) for k, v in env.headers if k not in _OURS and not k.startswith(_RESERVED)]
        if env.headers
        else []
    )
    headers.append((H_STAMP, _label_bytes(label)))
    headers.append((H_SOURCE, f"{msg.topic}/{msg.partition}/{msg.offset}".encode()))
    return Outgoing(msg, events_topic, event_key(msg, env.event_id), value, headers, None, label)


def event_key(msg: ConsumerRecord, event_id: str) -> bytes:
    """The key of the stamped event of raw record ``msg``: the raw record's own key, else
    its ``event_id``. Keeping the producer's key keeps a raw partition's order per key
    on the events topic (docs/flow-control.md, "Ordered"): with the event id as key, one
    entity's events would spread over the events partitions and lose their order."""
    return msg.key if msg.key is not None else event_id.encode()


def restamper(
    kafka: KafkaSettings, load_config: Callable[[], IngressSettings]
) -> Callable[[ConsumerRecord], Outgoing]:
    """:func:`transform` with ingress's settings, for ``ingest replay --dlq``.

    The settings are loaded on first use: a DLQ holding no ingress rejection
    never needs (nor validates) the ``INGEST_INGRESS_*`` variables.
    """
    loaded: list[IngressSettings] = []

    def restamp(msg: ConsumerRecord) -> Outgoing:
        if not loaded:
            loaded.append(load_config())
        cfg = loaded[0]
        return transform(
            msg,
            strategy=cfg.stamping(),
            events_topic=kafka.events_topic,
            dlq_topic=kafka.dlq_topic,
            max_bytes=cfg.max_event_bytes,
        )

    return restamp
