"""Stamping strategies: stable under redelivery, never touching an existing id."""

from __future__ import annotations

import pytest

from ingress.stamping import (
    R_MISSING_EVENT_ID_HEADER,
    ContentStrategy,
    HeaderStrategy,
    SourceStrategy,
    StampError,
    stamp,
    strategy_from_string,
)
from schemas.envelope import Envelope
from schemas.ids import content_event_id, source_event_id
from tests.unit.ingress.helpers import record

ENV = Envelope(type="t")


def test_source_is_the_coordinates_uuid_and_stable() -> None:
    msg = record(b"{}", topic="raw", partition=2, offset=41)
    first, label = stamp(ENV, msg, SourceStrategy())
    again, _ = stamp(
        ENV, record(b"other bytes", topic="raw", partition=2, offset=41), SourceStrategy()
    )
    assert label == "source"
    assert first.event_id == again.event_id == source_event_id("raw", 2, 41)
    assert (
        stamp(ENV, record(b"{}", partition=2, offset=42), SourceStrategy())[0].event_id
        != first.event_id
    )


def test_content_depends_on_key_and_value_only() -> None:
    a = record(b'{"type":"t"}', key=b"k", partition=0, offset=1)
    b = record(b'{"type":"t"}', key=b"k", partition=5, offset=99)
    c = record(b'{"type":"t"}', key=b"other", partition=0, offset=1)
    ids = [stamp(ENV, m, ContentStrategy())[0].event_id for m in (a, b, c)]
    assert ids[0] == ids[1] == content_event_id(b"k", b'{"type":"t"}')
    assert ids[2] != ids[0]
    assert stamp(ENV, a, ContentStrategy())[1] == "content"


def test_header_strategy_uses_the_header_value() -> None:
    msg = record(b"{}", headers=[("x-id", b" evt-7 ")])
    env, label = stamp(ENV, msg, HeaderStrategy("x-id"))
    assert (env.event_id, label) == ("evt-7", "header")


@pytest.mark.parametrize("headers", [[], [("x-id", b"")], [("x-id", b"\xff")], [("y", b"1")]])
def test_header_strategy_missing_or_bad_header_is_a_dlq_reason(headers: list) -> None:
    with pytest.raises(StampError) as info:
        stamp(ENV, record(b"{}", headers=headers), HeaderStrategy("x-id"))
    assert info.value.reason == R_MISSING_EVENT_ID_HEADER


@pytest.mark.parametrize("strategy", [SourceStrategy(), ContentStrategy(), HeaderStrategy("h")])
def test_existing_id_is_kept_untouched(strategy) -> None:
    env = Envelope(type="t", event_id="producer-id-1")
    out, label = stamp(env, record(b"{}", offset=3), strategy)
    assert out is env and label == "existing"


def test_strategy_from_string() -> None:
    assert isinstance(strategy_from_string("source"), SourceStrategy)
    assert isinstance(strategy_from_string(" content "), ContentStrategy)
    assert strategy_from_string("header:X-Event-Id") == HeaderStrategy("X-Event-Id")
    for bad in ("uuid4", "header:", "", "Source"):
        with pytest.raises(ValueError):
            strategy_from_string(bad)


@pytest.mark.parametrize("value", [b"a\x00b", b"a\x1bb", b"e" * 513])
def test_header_strategy_checks_the_id_like_one_in_the_body(value: bytes) -> None:
    with pytest.raises(StampError) as info:
        stamp(ENV, record(b"{}", headers=[("x-id", value)]), HeaderStrategy("x-id"))
    assert info.value.reason == "bad_id"
