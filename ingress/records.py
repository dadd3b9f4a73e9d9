"""One raw message in, one outgoing record out: a stamped event or a DLQ record.

Pure functions (no Kafka I/O) so every branch is unit-testable. The service
sends what these return and commits a raw offset only once its record is
acknowledged.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

from aiokafka.structs import ConsumerRecord

from ingress.stamping import StampError, Strategy, stamp
from pipeline.kafka import dlq_headers
from schemas.envelope import EnvelopeError, encode, parse

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
    A NamedTuple, not a frozen dataclass: one is built per event and a frozen
    dataclass's ``__init__`` costs about 2 µs of ingress's per-event budget.
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


@functools.cache
def _label_bytes(label: str) -> bytes:
    return label.encode()


def to_dlq(msg: ConsumerRecord, dlq_topic: str, reason: str, detail: str) -> Outgoing:
    """The original key and value byte-for-byte, plus the ``dlq_*`` headers."""
    return Outgoing(
        source=msg,
        topic=dlq_topic,
        key=msg.key,
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

    The event is keyed by its ``event_id``: every redelivery of one event lands on
    the same events partition, so the router sees duplicates in order, one after
    the other, on one consumer.
    """
    try:
        # Serialised once, after stamping; encode() raises what parse() would check.
        env = parse(msg.value, msg.headers, max_bytes=max_bytes, check_serialisable=False)
        env, label = stamp(env, msg, strategy)
        value = encode(env)
        assert env.event_id is not None
        headers = [(k, v) for k, v in env.headers if k not in _OURS] if env.headers else []
        headers.append((H_STAMP, _label_bytes(label)))
        headers.append((H_SOURCE, f"{msg.topic}/{msg.partition}/{msg.offset}".encode()))
        return Outgoing(msg, events_topic, env.event_id.encode(), value, headers, None, label)
    except (EnvelopeError, StampError) as exc:
        return to_dlq(msg, dlq_topic, exc.reason, exc.detail)
    except Exception as exc:  # a bug must not stall the partition: park the message
        log.exception(
            "unexpected error on %s/%d@%d; sending it to the DLQ",
            msg.topic,
            msg.partition,
            msg.offset,
        )
        return to_dlq(msg, dlq_topic, R_INTERNAL, f"{type(exc).__name__}: {exc}")


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
