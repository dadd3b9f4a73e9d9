"""Scenario 9: a hand-written corpus of malformed input through the real ingress process,
and a property test of :func:`schemas.envelope.parse` (>= 10,000 generated cases).

Every malformed message reaches the DLQ byte for byte with its expected ``dlq_reason``
and its source coordinates; the good messages interleaved with them still flow.
"""

from __future__ import annotations

import random
import string
import uuid
from collections import Counter

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schemas import envelope, ids
from tests.faults import harness as h
from tests.support import db, kafka

MAX_BYTES = 100_000
# 600 random letters: over the 512-byte id cap (random, so PostgreSQL would not compress it).
RANDOM_ID = "".join(random.Random(34).choices(string.ascii_letters, k=600)).encode()
CE = [("ce_specversion", b"1.0"), ("ce_id", b"ce-1"), ("ce_source", b"/s")]

# (value, headers, expected dlq_reason), hand-written.
BAD: list[tuple[bytes | None, list[tuple[str, bytes]], str]] = [
    (b"not json", [], "not_json"),
    (b"{broken", [], "not_json"),
    (b"", [], "not_json"),
    (None, [], "not_json"),  # a tombstone (keyed: aiokafka needs a key or a value)
    (b"[1, 2]", [], "not_object"),
    (b"42", [], "not_object"),
    (b'"just a string"', [], "not_object"),
    (b"null", [], "not_object"),
    (b'{"type":"t","data":' + b"[" * 300 + b"]" * 300 + b"}", [], "too_deep"),
    (b'{"type":"t","data":' + b"[" * 3000 + b"]" * 3000 + b"}", [], "not_json"),
    (b'{"type":"t","data":"' + b"x" * (MAX_BYTES + 1) + b'"}', [], "too_large"),
    (b'{"type":"t","data":"\xff\xfe"}', [], "invalid_utf8"),
    (b"\xc3\x28", [], "invalid_utf8"),
    (b'{"type": 5}', [], "bad_field"),
    (b'{"type":"t","source":5}', [], "bad_field"),
    (b'{"type":"t","time":{}}', [], "bad_field"),
    (b'{"type":"t","event_id":7}', [], "bad_field"),
    (b'{"type":"t","extensions":[1]}', [], "bad_field"),
    (b'{"data": {}}', [], "missing_type"),
    (b'{"type": ""}', [], "missing_type"),
    (b'{"specversion":"0.3","id":"x","type":"t","source":"s"}', [], "unsupported_specversion"),
    (b'{"specversion":["1.0"],"id":"x","type":"t","source":"s"}', [], "unsupported_specversion"),
    (b'{"specversion":"1.0","type":"t","source":"s"}', [], "bad_field"),  # no id
    (b"{}", [("ce_specversion", b"\xff\xfe")], "bad_headers"),
    (
        b"{}",
        [("ce_specversion", b"2.0"), ("ce_id", b"1"), ("ce_type", b"t")],
        "unsupported_specversion",
    ),
    (b"{}", CE, "missing_type"),  # binary mode without ce_type
    (b"\xff", [*CE, ("ce_type", b"t")], "invalid_utf8"),
    # Fields checked at the edge (issue 34): what PostgreSQL or a workflow id cannot hold.
    (
        b'{"event_id":"poison\\u0000","type":"demo.order.created","source":"x",'
        b'"data":{"order_id":"o-1"}}',
        [],
        "bad_id",
    ),
    (b'{"type":"t","event_id":"' + RANDOM_ID + b'","data":{}}', [], "bad_id"),
    (b'{"type":"t","event_id":"a\\nb","data":{}}', [], "bad_id"),
    (b'{"type":"t\\u0007","data":{}}', [], "bad_id"),
    (b'{"specversion":"1.0","id":"x\\u001f","type":"t","source":"s"}', [], "bad_id"),
    (b'{"specversion":"1.0","id":"x","type":"t","source":"' + RANDOM_ID + b'"}', [], "bad_id"),
    (b"{}", [*CE[:2], ("ce_source", b"/s\x01"), ("ce_type", b"t")], "bad_id"),
    (b'{"type":"t","data":{"a":"x\\u0000y"}}', [], "nul_character"),
    (b'{"type":"t","data":{"k\\u0000":1}}', [], "nul_character"),
    (b'{"type":"t","subject":"\\u0000","data":null}', [], "nul_character"),
    (b"\x00", [*CE, ("ce_type", b"t")], "nul_character"),  # binary mode: the body is data
]


@pytest.mark.timeout(h.scaled(180, 600))
async def test_bad_input_corpus_reaches_the_dlq(stack, cfg, topics, task_queue, fault):
    rounds = h.scaled(1, 5)
    tag = uuid.uuid4().hex[:8]
    messages: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes]]]] = []
    expect: list[str | None] = []  # per message: a DLQ reason, or None for a good event
    for r in range(rounds):
        for i, (value, headers, reason) in enumerate(BAD):
            good = db.event(f"good.{tag}", n=f"{r}-{i}")
            key = b"tombstone" if value is None else None
            messages += [(None, good, [("x-garbage", b"\x00\xff")]), (key, value, headers)]
            expect += [None, reason]
    ep = h.Endpoints(stack.kafka, stack.temporal, cfg.database.url.get_secret_value())
    pipe = fault.pipeline(ep, topics, task_queue)
    figures = fault.figures(
        "9 bad input corpus", events=len(messages), kills=0, restarts=0, duplicate_runs=0
    )
    ingress = await pipe.spawn("ingress", INGEST_MAX_EVENT_BYTES=str(MAX_BYTES))
    coords = await kafka.produce(stack.kafka, topics.raw, messages)
    await pipe.committed_to_end("ingress", 90)
    ingress.assert_alive()
    await fault.close()

    bad_at = {c: (m, e) for c, m, e in zip(coords, messages, expect, strict=True) if e}
    good_at = {c for c, e in zip(coords, expect, strict=True) if e is None}
    dlq = await kafka.read_all(stack.kafka, topics.dlq)
    events = await kafka.read_all(stack.kafka, topics.events)
    got = {orjson.loads(m.value)["event_id"] for m in events}
    figures.update(lost=len(good_at) - len(got), dlq=len(dlq), dlq_expected=len(bad_at))
    seen: Counter[tuple[int, int]] = Counter()
    for m in dlq:
        hd = dict(m.headers)
        assert hd["dlq_source_topic"].decode() == topics.raw
        c = (int(hd["dlq_source_partition"]), int(hd["dlq_source_offset"]))
        (_, value, _), reason = bad_at[c]
        assert hd["dlq_reason"].decode() == reason, (value and value[:60], hd["dlq_detail"])
        assert hd["dlq_detail"]
        assert (m.value or b"") == (value or b""), "the DLQ keeps the original bytes"
        seen[c] += 1
    assert set(seen) == set(bad_at), f"missing from the DLQ: {set(bad_at) - set(seen)}"
    assert set(seen.values()) == {1}
    assert got == {ids.source_event_id(topics.raw, p, o) for p, o in good_at}
    assert len(events) == len(good_at)


# --- property test of the parser --------------------------------------------------

REASONS = {
    envelope.R_INVALID_UTF8,
    envelope.R_NOT_JSON,
    envelope.R_NOT_OBJECT,
    envelope.R_MISSING_TYPE,
    envelope.R_BAD_FIELD,
    envelope.R_TOO_LARGE,
    envelope.R_BAD_SPECVERSION,
    envelope.R_MISSING_EVENT_ID,
    envelope.R_BAD_HEADERS,
    envelope.R_TOO_DEEP,
    envelope.R_BAD_ID,
    envelope.R_NUL,
}

_scalars = st.sampled_from([None, True, 0, -1, 1.5, 2**62, "", "t", "1.0", [], {}, [1], {"a": 1}])
_scalars = _scalars | st.text(max_size=8) | st.sampled_from(["\x00", "a\x1fb", "x" * 513])
_field_names = st.sampled_from(
    ["type", "event_id", "source", "time", "subject", "data", "extensions", "specversion", "id"]
)
_docs = st.dictionaries(_field_names, _scalars, max_size=6)
_values = st.one_of(
    st.none(),
    st.binary(max_size=32),
    _scalars.map(orjson.dumps),
    _docs.map(orjson.dumps),
    _docs.map(lambda d: orjson.dumps(d)[:-1]),  # truncated
    st.tuples(_docs, st.binary(max_size=3)).map(lambda t: orjson.dumps(t[0]) + t[1]),
    st.integers(0, 1100).map(lambda n: b'{"type":"t","data":' + b"[" * n + b"]" * n + b"}"),
)
_header_names = st.sampled_from(["ce_specversion", "ce_id", "ce_type", "ce_source", "x-any"])
_header_values = st.sampled_from([b"1.0", b"0.3", b"t", b"", b"\xff", None])
_headers = st.lists(st.tuples(_header_names, _header_values), max_size=4)


@settings(
    max_examples=h.scaled(10_000, 50_000),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    database=None,
)
@given(value=_values, headers=_headers, max_bytes=st.sampled_from([16, 64, 1_000_000]))
def test_parse_accepts_or_rejects_with_a_reason(value, headers, max_bytes):
    try:
        env = envelope.parse(value, headers, max_bytes=max_bytes)
    except envelope.EnvelopeError as exc:
        assert exc.reason in REASONS
        assert exc.detail
        return
    assert isinstance(env.type, str) and env.type
    assert env.event_id is None or isinstance(env.event_id, str)
    doc = orjson.loads(env.to_json())  # whatever parse accepts, ingress can write
    # ... and PostgreSQL can store: no NUL anywhere, identifiers checked at the edge
    assert envelope.nul_path(doc) is None
    assert envelope.id_problem(env.type) is None
    assert env.event_id is None or envelope.id_problem(env.event_id) is None
    assert doc["type"] == env.type
    assert len(value or b"") <= max_bytes
