"""transform(): one raw message -> a stamped event or a DLQ record, never an exception."""

from __future__ import annotations

import orjson

from ingress import records
from ingress.records import H_SOURCE, H_STAMP, transform
from ingress.stamping import SourceStrategy, Strategy
from pipeline.kafka import key_partition
from schemas.ids import source_event_id
from tests.unit.ingress.helpers import TransformKw, record

KW: TransformKw = {
    "strategy": SourceStrategy(),
    "events_topic": "ev",
    "dlq_topic": "dlq",
    "max_bytes": 1000,
}


def hdrs(out: records.Outgoing) -> dict[str, bytes]:
    return dict(out.headers)


def test_stamped_event_keeps_its_raw_key_with_headers() -> None:
    msg = record(
        b'{"type":"t","data":{"a":1}}',
        key=b"k",
        headers=[("trace", b"1")],
        topic="raw",
        partition=1,
        offset=7,
    )
    out = transform(msg, **KW)
    eid = source_event_id("raw", 1, 7)
    assert out.topic == "ev" and out.reason is None and out.label == "source"
    assert out.key == b"k"  # the producer's key: one entity's events stay in one partition
    assert out.value is not None
    assert orjson.loads(out.value) == {"event_id": eid, "type": "t", "data": {"a": 1}}
    assert hdrs(out) == {"trace": b"1", H_STAMP: b"source", H_SOURCE: b"raw/1/7"}


def test_existing_id_kept_and_incoming_ingress_headers_replaced() -> None:
    msg = record(b'{"type":"t","event_id":"mine"}', headers=[(H_STAMP, b"forged")])
    out = transform(msg, **KW)
    assert out.value is not None
    assert out.key == b"mine" and orjson.loads(out.value)["event_id"] == "mine"
    assert [v for k, v in out.headers if k == H_STAMP] == [b"existing"]


def test_malformed_goes_to_dlq_with_original_bytes() -> None:
    msg = record(b"\x00garbage", key=b"k", headers=[("trace", b"1")], partition=2, offset=9)
    out = transform(msg, **KW)
    assert (out.topic, out.key, out.value, out.reason) == ("dlq", b"k", b"\x00garbage", "not_json")
    h = hdrs(out)
    assert h["dlq_reason"] == b"not_json" and h["dlq_component"] == b"ingress"
    assert (h["dlq_source_topic"], h["dlq_source_partition"], h["dlq_source_offset"]) == (
        b"raw",
        b"2",
        b"9",
    )
    assert h["trace"] == b"1" and h["dlq_attempt"] == b"1"


def test_too_large_goes_to_dlq() -> None:
    out = transform(record(b'{"type":"t","data":"' + b"x" * 2000 + b'"}'), **KW)
    assert out.reason == "too_large"


def test_a_bug_in_stamping_goes_to_dlq_not_up_the_stack() -> None:
    class Broken:
        label = "broken"

        def derive(self, msg):
            raise RuntimeError("boom")

    strategy: Strategy = Broken()
    kw: TransformKw = {**KW, "strategy": strategy}
    out = transform(record(b'{"type":"t"}'), **kw)
    assert out.reason == records.R_INTERNAL and b"boom" in hdrs(out)["dlq_detail"]


def test_a_keyless_record_is_keyed_by_its_event_id_on_both_paths() -> None:
    plain = transform(record(b'{"type":"t"}', topic="raw", partition=0, offset=3), **KW)
    assert plain.key == source_event_id("raw", 0, 3).encode()
    # A CloudEvents record takes the full path (parse, stamp, serialise).
    ce = record(b"{}", headers=[("ce_type", b"t"), ("ce_id", b"x1"), ("ce_source", b"s"),
                               ("ce_specversion", b"1.0")])  # fmt: skip
    full = transform(ce, **KW)
    assert full.reason is None and full.key == full_event_id(full)


def test_the_full_path_keeps_the_raw_key_too() -> None:
    ce_headers = [("ce_type", b"t"), ("ce_id", b"x1"), ("ce_source", b"s"),
                  ("ce_specversion", b"1.0")]  # fmt: skip
    ce = record(b"{}", key=b"order-7", headers=ce_headers)
    out = transform(ce, **KW)
    assert out.reason is None and out.key == b"order-7"


def test_one_keys_records_keep_their_order_and_partition() -> None:
    """Records of one key, interleaved with others' in one raw partition: their stamped
    events keep the raw order and all map to one events partition."""
    keys = [b"a", b"b", b"a", b"c", b"a", b"b"]
    msgs = [record(b'{"type":"t","data":{"i":%d}}' % i, key=k, offset=i)
            for i, k in enumerate(keys)]  # fmt: skip
    outs = records.transform_all(msgs, **KW)
    for key in set(keys):
        mine = [o for o in outs if o.key == key]
        assert [orjson.loads(o.value or b"")["data"]["i"] for o in mine] == [
            i for i, k in enumerate(keys) if k == key
        ]
        assert len({key_partition(o.key or b"", 6) for o in mine}) == 1


def full_event_id(out: records.Outgoing) -> bytes:
    return str(orjson.loads(out.value or b"")["event_id"]).encode()
