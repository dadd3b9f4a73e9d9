"""The plain path of transform() against the full path it short-cuts (the code before it).

For every message, both must give the same topic, key, headers, label and DLQ
verdict; a DLQ record must be identical byte for byte; an event must be the same
JSON document and parse (as the router parses it) to the same envelope. Bodies
already in the envelope's own order and compact form must even be the same bytes.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from ingress import records
from ingress.records import Outgoing, transform
from ingress.stamping import (
    ContentStrategy,
    HeaderStrategy,
    SourceStrategy,
    Strategy,
)
from schemas import envelope
from tests.unit.ingress.helpers import record

MAX = 200_000


def _deep(levels: int) -> bytes:
    return b'{"type":"t","data":' + b"[" * levels + b"]" * levels + b"}"


BODIES: list[Any] = [
    # the bench corpus shape: compact, in the envelope's key order, no id
    orjson.dumps({"type": "bench.raw", "source": "bench", "data": {"n": 7, "pad": "x" * 64}}),
    b'{"type":"t","data":{"a":1}}',
    b'{"type":"t","data":null}',
    b'{"type":"t","data":[1,2.5,-0.0,1e300,true,false,null,"s"]}',
    b'{"type":"t","data":123456789012345678901234567890}',
    b'{"type":"t","data":18446744073709551615}',
    b'{"type":"t","time":"2026-11-30T16:00:00Z","subject":"s","source":"x","data":{}}',
    b'{"data":{"z":1,"a":2},"type":"reordered"}',
    b'{"type":"t","data":1,"extensions":{"ext":"v","n":{"deep":[1]}}}',
    # existing ids, anywhere in the object
    b'{"event_id":"mine","type":"t","data":{"a":1}}',
    b'{"type":"t","data":{"a":1},"event_id":"last"}',
    b'{"type":"t","data":1,"event_id":"quote\\"and\\\\slash"}',
    b'{"event_id":"","event_id":"dup-wins","type":"t","data":1}',
    # unicode, raw and escaped
    '{"type":"é.type","data":{"name":"Zoë 🚀","k😀":"v"}}'.encode(),
    b'{"type":"\\u00e9t\\u00e9","data":"\\ud83d\\ude80 \\u0000 \\n\\t"}',
    '{"event_id":"idé-🚀","type":"t","data":"ü"}'.encode(),
    # whitespace
    b'{ "type" : "t" ,\n  "data" : { "a" : [ 1 , 2 ] }\n}\n',
    b'  {"type":"t","data":1}',
    b'{"type":"t","data":1}   ',
    # nesting: fine, too deep to re-serialise, brackets only in strings
    _deep(100),
    _deep(252),
    _deep(253),
    _deep(300),
    b'{"type":"t","data":"' + b"[{" * 300 + b'"}',
    # not what to_dict writes: unknown keys, nulls, no data, empty/odd extensions
    b'{"type":"t","data":1,"extra":true}',
    b'{"type":"t","source":null,"data":1}',
    b'{"type":"t","time":null,"subject":null,"data":1}',
    b'{"type":"t"}',
    b'{"type":"t","data":1,"extensions":{}}',
    b'{"type":"t","data":1,"extensions":[]}',
    b'{"type":"t","data":1,"extensions":null}',
    b'{"type":"a","type":"b","data":1}',
    b'{"type":"t","data":{"a":1,"a":{"b":2,"b":3}},"data":{"a":4,"a":5}}',  # the last one wins
    # empty, null or odd ids
    b'{"event_id":"","type":"t","data":1}',
    b'{"event_id":null,"type":"t","data":1}',
    b'{"event_id":5,"type":"t","data":1}',
    b'{"event_id":"x","event_id":"","type":"t","data":1}',
    # CloudEvents structured
    b'{"specversion":"1.0","id":"ce-1","source":"s","type":"t","data":{"a":1},"ext1":"v"}',
    b'{"specversion":"0.3","id":"ce-1","source":"s","type":"t"}',
    # malformed
    None,
    b"",
    b"{broken",
    b"\xff\xfe{}",
    b'{"type":"t","data":"\xc3"}',
    b"[1,2]",
    b'"just a string"',
    b"{}",
    b'{"type":5,"data":1}',
    b'{"type":"","data":1}',
    b'{"type":"t","source":7,"data":1}',
    b'{"type":"t","data":1e400}',
    b'{"type":"t","data":NaN}',
    b'{"type":"t","data":"\\ud800"}',
    b'\xef\xbb\xbf{"type":"t","data":1}',
    b'{"type":"t","data":"' + b"x" * (MAX + 1) + b'"}',  # too large
    b'{"type":"t","data":"' + b"y" * 70_000 + b'"}',  # valid, beyond the plain path's size
]

HEADERS: list[list[tuple[str, Any]]] = [
    [],
    [("trace", b"1"), ("empty", b"")],
    [(records.H_STAMP, b"forged"), (records.H_SOURCE, b"x/0/0"), ("keep", b"k")],
    [("id-hdr", b" from-header ")],
    [("none", None)],
    [("ce_specversion", b"1.0"), ("ce_id", b"b1"), ("ce_source", b"s"), ("ce_type", b"t")],
    [("ce_note", b"not binary mode")],
    [("dlq_attempt", b"1"), ("dlq_reason", b"old")],
    [("bad", 5)],
]

STRATEGIES: list[Strategy] = [SourceStrategy(), ContentStrategy(), HeaderStrategy("id-hdr")]


def _full(msg: Any, strategy: Strategy) -> Outgoing:
    """transform() with every body taken as not plain: the code before the plain path."""
    plain = records.plain_event_id
    records.plain_event_id = lambda body: envelope.NOT_PLAIN  # type: ignore[assignment]
    try:
        return transform(msg, strategy=strategy, events_topic="ev", dlq_topic="dlq", max_bytes=MAX)
    finally:
        records.plain_event_id = plain  # type: ignore[assignment]


def _new(msg: Any, strategy: Strategy) -> Outgoing:
    return transform(msg, strategy=strategy, events_topic="ev", dlq_topic="dlq", max_bytes=MAX)


def _via_plain_path(msg: Any, strategy: Strategy) -> tuple[Outgoing, bool]:
    """transform(), and whether it went the plain path (the full path not called)."""
    full, calls = records._full, []

    def spy(*args: Any) -> Outgoing:
        calls.append(args)
        return full(*args)

    records._full = spy  # type: ignore[assignment]
    try:
        out = _new(msg, strategy)
    finally:
        records._full = full  # type: ignore[assignment]
    return out, out.reason is None and not calls


def _msg(i: int, body: Any, headers: list[tuple[str, Any]]) -> Any:
    key = f"k{i}".encode()
    return record(body, key=key, headers=headers, topic="raw", partition=i % 3, offset=i)


def _assert_equivalent(old: Outgoing, new: Outgoing) -> None:
    assert (new.topic, new.key, new.reason) == (old.topic, old.key, old.reason)
    assert new.label == old.label
    assert new.headers == old.headers
    assert new.source is old.source
    if old.reason is not None:
        assert new.value == old.value  # a DLQ record: the original bytes, untouched
        return
    assert new.value is not None and old.value is not None
    assert orjson.loads(new.value) == orjson.loads(old.value)  # the same JSON document
    routed_new = envelope.parse(new.value, new.headers)
    routed_old = envelope.parse(old.value, old.headers)
    assert routed_new == routed_old  # what the router sees
    assert routed_new.to_dict() == routed_old.to_dict()


@pytest.mark.parametrize("strategy", STRATEGIES, ids=lambda s: s.label)
def test_plain_path_is_equivalent_to_the_full_path(strategy: Strategy) -> None:
    seen: set[tuple[str | None, str | None]] = set()
    plain = 0
    for i, (body, headers) in enumerate((b, h) for b in BODIES for h in HEADERS):
        msg = _msg(i, body, headers)
        old = _full(msg, strategy)
        new, took_plain = _via_plain_path(msg, strategy)
        _assert_equivalent(old, new)
        seen.add((old.reason, old.label))
        plain += took_plain
    # the corpus exercises both paths, stamped and kept ids, and DLQ verdicts
    assert plain >= 40
    assert {(None, strategy.label), (None, "existing"), ("not_json", None)} <= seen
    assert {("too_deep", None), ("bad_headers", None), ("invalid_utf8", None)} <= seen


def test_bodies_in_the_envelopes_own_form_come_out_byte_identical() -> None:
    for i in range(500):
        body = orjson.dumps({"type": "bench.raw", "source": "bench", "data": {"n": i, "é": "🚀"}})
        msg = _msg(i, body, [("trace", b"t")] if i % 2 else [])
        new, took_plain = _via_plain_path(msg, SourceStrategy())
        assert took_plain
        assert new == _full(msg, SourceStrategy())


def test_a_kept_id_forwards_the_original_bytes() -> None:
    body = b'{"type":"t","data":{"a":1},"event_id":"mine"}'
    new, took_plain = _via_plain_path(_msg(1, body, []), SourceStrategy())
    assert took_plain and new.value is body and new.label == "existing"


@pytest.mark.parametrize(
    "body",
    [
        b'{"type":"t","data":1,"extra":true}',
        b'{"type":"t","source":null,"data":1}',
        b'{"type":"t"}',
        b'{"event_id":"","type":"t","data":1}',
        _deep(253),
        b' {"type":"t","data":1}',
        b'{"specversion":"1.0","id":"ce-1","source":"s","type":"t"}',
    ],
)
def test_what_the_full_path_would_rewrite_is_not_plain(body: bytes) -> None:
    assert envelope.plain_event_id(body) == envelope.NOT_PLAIN
