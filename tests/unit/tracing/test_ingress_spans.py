"""Ingress starts the event's trace, or continues its producer's (in-memory exporter)."""

from __future__ import annotations

import orjson
from aiokafka.structs import ConsumerRecord
from opentelemetry.trace import StatusCode

from ingress.records import transform_all
from ingress.stamping import SourceStrategy
from ingress.traces import trace_records
from pipeline import tracing

TRACE = 0x4BF92F3577B34DA6A3CE929D0E0E4736
SPAN = 0x00F067AA0BA902B7
TRACEPARENT = f"00-{TRACE:032x}-{SPAN:016x}-01".encode()


def _raw(body: bytes, headers: list[tuple[str, bytes]], offset: int = 7) -> ConsumerRecord:
    return ConsumerRecord("raw", 1, offset, 0, 0, None, body, None, len(body), len(body), headers)


def _out(*msgs: ConsumerRecord):
    return transform_all(
        msgs, strategy=SourceStrategy(), events_topic="ev", dlq_topic="dlq", max_bytes=100_000
    )


def _traceparent(headers: list[tuple[str, bytes]]) -> str:
    found = [v.decode() for k, v in headers if k == "traceparent"]
    assert len(found) == 1, headers
    return found[0]


def test_a_producers_traceparent_is_the_parent_and_is_replaced_by_ingress_own(spans):
    out = _out(_raw(orjson.dumps({"type": "t"}), [("traceparent", TRACEPARENT)]))
    trace_records(out, "ingest-ingress")
    (span,) = spans.get_finished_spans()
    assert span.name == "process raw"
    assert span.context.trace_id == TRACE
    assert span.parent is not None and span.parent.span_id == SPAN
    assert not span.links  # the parent is the creation context; no second reference
    attrs = span.attributes or {}
    assert attrs["ingest.event_id"] == out[0].key.decode()
    assert attrs["ingest.stamp"] == "source"
    assert attrs["messaging.consumer.group.name"] == "ingest-ingress"
    # The stamped event carries ingress's span: the router's span becomes its child.
    assert _traceparent(out[0].headers) == f"00-{TRACE:032x}-{span.context.span_id:016x}-01"


def test_an_event_without_one_starts_a_trace_named_by_its_event_id(spans):
    raw = _raw(orjson.dumps({"event_id": "order-1", "type": "t"}), [])
    out = _out(raw)
    trace_records(out, "g")
    (span,) = spans.get_finished_spans()
    assert span.parent is None
    assert span.context.trace_id == tracing.trace_id_for("order-1")
    assert _traceparent(out[0].headers).split("-")[1] == f"{tracing.trace_id_for('order-1'):032x}"


def test_a_dead_lettered_record_keeps_a_traceparent_and_an_error_status(spans):
    out = _out(_raw(b"{not json", [("traceparent", TRACEPARENT)]))
    assert out[0].topic == "dlq"
    trace_records(out, "g")
    (span,) = spans.get_finished_spans()
    assert span.status.status_code == StatusCode.ERROR
    assert (span.attributes or {})["ingest.dlq_reason"] == "not_json"
    assert _traceparent(out[0].headers).split("-")[1] == f"{TRACE:032x}"


def test_off_the_producers_traceparent_passes_through_untouched(spans, monkeypatch):
    monkeypatch.setattr(tracing, "ENABLED", False)
    out = _out(_raw(orjson.dumps({"type": "t"}), [("traceparent", TRACEPARENT)]))
    assert _traceparent(out[0].headers) == TRACEPARENT.decode()
    assert list(spans.get_finished_spans()) == []
