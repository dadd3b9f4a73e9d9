"""Building ConsumerRecords without a broker."""

from __future__ import annotations

from typing import TypedDict

from aiokafka.structs import ConsumerRecord

from ingress.stamping import Strategy


class TransformKw(TypedDict):
    """The keyword arguments of :func:`ingress.records.transform`."""

    strategy: Strategy
    events_topic: str
    dlq_topic: str
    max_bytes: int


def record(
    value: bytes | None,
    *,
    key: bytes | None = None,
    headers: list[tuple[str, bytes]] | None = None,
    topic: str = "raw",
    partition: int = 0,
    offset: int = 0,
) -> ConsumerRecord:
    return ConsumerRecord(
        topic=topic,
        partition=partition,
        offset=offset,
        timestamp=0,
        timestamp_type=0,
        key=key,
        value=value,
        checksum=None,
        serialized_key_size=len(key or b""),
        serialized_value_size=len(value or b""),
        headers=tuple(headers or ()),
    )
