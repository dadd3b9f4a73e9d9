"""The envelope parser: the three accepted forms and every rejection reason."""

from __future__ import annotations

import json

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schemas import envelope as E
from schemas.envelope import Envelope, EnvelopeError, parse
from schemas.ids import cloudevent_event_id

KNOWN_REASONS = {v for k, v in vars(E).items() if k.startswith("R_") and isinstance(v, str)}

CE_BINARY = [
    ("ce_specversion", b"1.0"),
    ("ce_id", b"ce-1"),
    ("ce_source", b"/orders"),
    ("ce_type", b"order.created"),
]


def j(doc: object) -> bytes:
    return orjson.dumps(doc)


def reason_of(
    value: bytes | None, headers: object = (), *, max_bytes: int = E.MAX_EVENT_BYTES
) -> str:
    with pytest.raises(EnvelopeError) as info:
        parse(value, headers, max_bytes=max_bytes)
    return info.value.reason


# -- accepted forms -----------------------------------------------------------


def test_our_envelope_with_id() -> None:
    env = parse(
        j(
            {
                "event_id": "e1",
                "type": "t",
                "source": "s",
                "time": "2026-01-01T00:00:00Z",
                "subject": "x",
                "data": {"a": 1},
                "extensions": {"k": "v"},
            }
        ),
        [("trace", b"abc")],
    )
    assert env == Envelope(
        type="t",
        event_id="e1",
        source="s",
        time="2026-01-01T00:00:00Z",
        subject="x",
        data={"a": 1},
        extensions={"k": "v"},
        headers=(("trace", b"abc"),),
    )


def test_our_envelope_without_id_and_empty_id() -> None:
    assert parse(j({"type": "t"})).event_id is None
    assert parse(j({"type": "t", "event_id": ""})).event_id is None


def test_cloudevents_structured() -> None:
    env = parse(
        j(
            {
                "specversion": "1.0",
                "id": "c1",
                "source": "/s",
                "type": "t",
                "data": [1],
                "datacontenttype": "application/json",
                "tenant": "acme",
            }
        )
    )
    assert (env.event_id, env.type, env.source, env.data) == (
        cloudevent_event_id("/s", "c1"),
        "t",
        "/s",
        [1],
    )
    assert env.extensions == {
        "tenant": "acme",
        "specversion": "1.0",
        "id": "c1",
        "datacontenttype": "application/json",
    }


def test_cloudevents_structured_data_base64() -> None:
    env = parse(
        j({"specversion": "1.0", "id": "c", "source": "s", "type": "t", "data_base64": "AAE="})
    )
    assert env.data == {"data_base64": "AAE="}


def test_cloudevents_binary_json_body() -> None:
    env = parse(j({"a": 1}), [*CE_BINARY, ("ce_tenant", b"acme"), ("trace", b"1")])
    assert (env.event_id, env.type, env.source, env.data) == (
        cloudevent_event_id("/orders", "ce-1"),
        "order.created",
        "/orders",
        {"a": 1},
    )
    assert env.extensions == {"tenant": "acme", "specversion": "1.0", "id": "ce-1"}
    assert env.headers == (("trace", b"1"),)  # ce_* headers are folded into the envelope


def test_cloudevents_binary_text_and_empty_body() -> None:
    assert parse(b"plain text", CE_BINARY).data == "plain text"
    assert parse(b"", CE_BINARY).data is None
    assert parse(None, CE_BINARY).data is None


def test_to_json_round_trips_through_parse() -> None:
    env = parse(j({"specversion": "1.0", "id": "c1", "source": "/s", "type": "t", "x": 1}))
    again = parse(env.to_json())
    assert (again.event_id, again.type, again.source) == (env.event_id, "t", "/s")
    assert again.extensions["id"] == "c1"


def test_a_cloudevent_is_identified_by_source_and_id() -> None:
    def structured(source: str, ce_id: str) -> str | None:
        doc = {"specversion": "1.0", "id": ce_id, "source": source, "type": "t", "data": {}}
        return parse(j(doc)).event_id

    def binary(source: str, ce_id: str) -> str | None:
        headers = [
            ("ce_specversion", b"1.0"),
            ("ce_id", ce_id.encode()),
            ("ce_source", source.encode()),
            ("ce_type", b"t"),
        ]
        return parse(b"{}", headers).event_id

    # The same id from two sources: two events.
    assert structured("/a", "1") != structured("/b", "1")
    assert binary("/a", "1") != binary("/b", "1")
    # One event, rendered either way (or delivered again): one id.
    for source, ce_id in [("/a", "1"), ("urn:é:x", "id with spaces"), ("a:b", "c")]:
        assert structured(source, ce_id) == binary(source, ce_id)
        assert structured(source, ce_id) == structured(source, ce_id)
        assert structured(source, ce_id) == cloudevent_event_id(source, ce_id)


# -- every rejection reason ------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "headers", "reason"),
    [
        (b"not json", (), E.R_NOT_JSON),
        (b"", (), E.R_NOT_JSON),
        (None, (), E.R_NOT_JSON),
        (b"\xef\xbb\xbf{}", (), E.R_NOT_JSON),  # BOM
        (b"[1, 2]", (), E.R_NOT_OBJECT),
        (b"42", (), E.R_NOT_OBJECT),
        (b'"str"', (), E.R_NOT_OBJECT),
        (b"null", (), E.R_NOT_OBJECT),
        (j({"data": 1}), (), E.R_MISSING_TYPE),
        (j({"type": ""}), (), E.R_MISSING_TYPE),
        (b"\xff\xfe{}", (), E.R_INVALID_UTF8),
        (j({"type": 5}), (), E.R_BAD_FIELD),
        (j({"type": "t", "event_id": 7}), (), E.R_BAD_FIELD),
        (j({"type": "t", "time": 1}), (), E.R_BAD_FIELD),
        (j({"type": "t", "extensions": []}), (), E.R_BAD_FIELD),
        (j({"specversion": "0.3", "id": "1", "source": "s", "type": "t"}), (), E.R_BAD_SPECVERSION),
        (j({"specversion": None, "type": "t"}), (), E.R_BAD_SPECVERSION),
        (j({"specversion": [], "type": "t"}), (), E.R_BAD_SPECVERSION),  # was a TypeError
        (j({"specversion": "1.0", "source": "s", "type": "t"}), (), E.R_BAD_FIELD),
        (j({"specversion": "1.0", "id": "1", "source": "s"}), (), E.R_MISSING_TYPE),
        (b"{}", [("ce_specversion", b"2.0")], E.R_BAD_SPECVERSION),
        (
            b"{}",
            [("ce_specversion", b"1.0"), ("ce_id", b"1"), ("ce_source", b"s")],
            E.R_MISSING_TYPE,
        ),
        (b"{}", [("ce_specversion", b"1.0"), ("ce_type", b"t")], E.R_BAD_FIELD),
        (b"{}", [*CE_BINARY[:3], ("ce_type", b"\xff")], E.R_BAD_HEADERS),
        (b"\xff", CE_BINARY, E.R_INVALID_UTF8),
        (j({"type": "t"}), [(b"bytes-name", b"v")], E.R_BAD_HEADERS),
        (j({"type": "t"}), [("n", "str value")], E.R_BAD_HEADERS),
        (j({"type": "t"}), [("only-one",)], E.R_BAD_HEADERS),
        (j({"type": "t"}), 17, E.R_BAD_HEADERS),
        (j({"type": "t", "data": [[[[]]]]}), (), None),  # control: accepted
    ],
)
def test_rejections(value: bytes | None, headers: object, reason: str | None) -> None:
    if reason is None:
        parse(value, headers)
        return
    assert reason_of(value, headers) == reason


def test_too_large() -> None:
    body = j({"type": "t", "data": "x" * 100})
    assert reason_of(body, max_bytes=50) == E.R_TOO_LARGE
    assert parse(body, max_bytes=len(body)).type == "t"
    assert reason_of(b"x" * 51, CE_BINARY, max_bytes=50) == E.R_TOO_LARGE


def test_too_deep_is_rejected_not_crashing_later() -> None:
    # orjson reads 1024 levels but writes 254: accepting it would crash to_json().
    body = b'{"type":"t","data":' + b"[" * 300 + b"]" * 300 + b"}"
    assert reason_of(body) == E.R_TOO_DEEP


def test_none_header_value_is_empty_bytes() -> None:
    assert parse(j({"type": "t"}), [("h", None)]).headers == (("h", b""),)


# -- property: parse() never raises anything but EnvelopeError --------------------

_json_scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8)
_json = st.recursive(
    _json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "type",
                    "event_id",
                    "id",
                    "source",
                    "specversion",
                    "data",
                    "time",
                    "subject",
                    "extensions",
                    "data_base64",
                    "x",
                ]
            )
            | st.text(max_size=4),
            inner,
            max_size=6,
        )
    ),
    max_leaves=12,
)
_value = st.one_of(
    st.none(),
    st.binary(max_size=300),
    # stdlib json: big ints, NaN and lone surrogate escapes, which orjson refuses
    _json.map(lambda d: json.dumps(d).encode()),
    st.builds(
        lambda depth, t: (
            (b'{"type":"t","data":' + b"[" * depth + b"]" * depth + b"}")
            if t
            else b"[" * depth + b"]" * depth
        ),
        st.integers(0, 1200),
        st.booleans(),
    ),
)
_hname = (
    st.sampled_from(["ce_specversion", "ce_id", "ce_source", "ce_type", "ce_time", "trace"])
    | st.text(max_size=6)
    | st.binary(max_size=4)
    | st.integers()
)
_hvalue = (
    st.sampled_from([b"1.0", b"0.3", b"x", b""])
    | st.binary(max_size=8)
    | st.none()
    | st.text(max_size=4)
    | st.integers()
)
_headers = st.one_of(
    st.lists(st.tuples(_hname, _hvalue), max_size=6),
    st.lists(st.tuples(_hname, _hvalue, _hvalue), max_size=2),
    st.none(),
    st.integers(),
    st.text(max_size=5),
    st.binary(max_size=5),
)


@settings(max_examples=2500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=_value, headers=_headers, max_bytes=st.integers(1, 2_000_000))
def test_parse_returns_envelope_or_known_error(
    value: bytes | None, headers: object, max_bytes: int
) -> None:
    try:
        env = parse(value, headers, max_bytes=max_bytes)
    except EnvelopeError as exc:
        assert exc.reason in KNOWN_REASONS, exc.reason
        return
    assert isinstance(env, Envelope) and env.type
    # Whatever parse() accepts, ingress can serialise and parse back.
    again = parse(env.with_event_id("x").to_json())
    assert again.type == env.type


def test_hot_path_envelopes_equal_the_constructor_built_ones() -> None:
    # parse() and with_event_id() skip the frozen __init__ for speed; same object all the same.
    import dataclasses

    doc = {"type": "t", "source": "s", "time": "now", "subject": "x", "data": [1], "extensions": {}}
    env = parse(j(doc), [("h", b"1")])
    hdrs = (("h", b"1"),)
    built = Envelope(type="t", source="s", time="now", subject="x", data=[1], headers=hdrs)
    assert env == built
    stamped = env.with_event_id("e1")
    assert stamped == dataclasses.replace(built, event_id="e1") and env.event_id is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        stamped.event_id = "other"  # type: ignore[misc]


# --- identifiers and NUL, checked at the edge (issue 34) ------------------------------


@pytest.mark.parametrize(
    ("body", "headers", "reason", "where"),
    [
        (b'{"event_id":"poison\\u0000","type":"t","data":{}}', [], "bad_id", "'event_id'"),
        (b'{"event_id":"' + b"e" * 513 + b'","type":"t","data":{}}', [], "bad_id", "513 bytes"),
        (b'{"event_id":"\xc3\xa9' * 1 + b"e" * 511 + b'","type":"t"}', [], "bad_id", "513 bytes"),
        (b'{"type":"t\\u009f","data":{}}', [], "bad_id", "'type'"),
        (b'{"specversion":"1.0","id":"a\\tb","source":"s","type":"t"}', [], "bad_id", "'id'"),
        (
            b"1",
            [
                ("ce_specversion", b"1.0"),
                ("ce_id", b"1"),
                ("ce_source", b"s\x7f"),
                ("ce_type", b"t"),
            ],
            "bad_id",
            "'source'",
        ),
        (b'{"type":"t","data":[1,{"a":"\\u0000"}]}', [], "nul_character", "$.data[1].a"),
        (b'{"type":"t","extensions":{"x\\u0000":1},"data":1}', [], "nul_character", "a key"),
    ],
)
def test_identifiers_and_nul_are_refused_with_their_reason(body, headers, reason, where):
    assert E.plain_event_id(body) == E.NOT_PLAIN or headers
    with pytest.raises(E.EnvelopeError) as info:
        E.parse(body, headers)
    assert info.value.reason == reason
    assert where in info.value.detail


@pytest.mark.parametrize(
    "body",
    [
        b'{"event_id":"' + b"e" * 512 + b'","type":"t","data":{}}',  # exactly at the cap
        b'{"event_id":"caf\xc3\xa9 \xe2\x82\xac","type":"t","data":{}}',  # non-ASCII is fine
        b'{"type":"t","data":{"a":"\\\\u0000"}}',  # a backslash, then "u0000": no NUL
        b'{"type":"t","data":{"a":"tab\\there"}}',  # control characters inside data are fine
    ],
)
def test_what_stays_accepted(body):
    env = E.parse(body)
    assert env.type == "t"
