"""The relay's records carry the trace of the task step that wrote their outbox row, and,
tracing on in the relay, a ``publish <topic>`` PRODUCER span joins that trace
(``relay/service.py``, ``pipeline.tracing.producing``). Kafka is a fake producer here;
the real stack's version: tests/integration/tracing/test_worker_trace.py.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest
from opentelemetry.trace import SpanKind, StatusCode

from pipeline import settings, tracing
from pipeline.runtime import Shutdown
from relay.outbox import Position, Row, with_traceparent
from relay.refusals import Refused, Stage
from relay.service import Relay
from relay.settings import RelaySettings

TRACE = 0x4BF92F3577B34DA6A3CE929D0E0E4736
SPAN = 0x00F067AA0BA902B7
STORED = f"00-{TRACE:032x}-{SPAN:016x}-01"


class Producer:
    def __init__(self, refuse: BaseException | None = None) -> None:
        self.sent: list[tuple[str, list[tuple[str, bytes]]]] = []
        self.refuse = refuse

    async def send(self, topic: str, value: Any, key: Any = None, headers: Any = None) -> Any:
        if self.refuse is not None:
            raise self.refuse
        self.sent.append((topic, list(headers or [])))
        fut = asyncio.get_running_loop().create_future()
        fut.set_result(None)
        return fut


def _row(traceparent: str | None, headers: list[tuple[str, bytes]] | None = None) -> Row:
    hdrs = with_traceparent(list(headers or [("task_id", b"task-1")]), traceparent)
    return Row("task-1", Position(5, 1), "out", b"k", hdrs, b"{}", datetime.now(UTC), traceparent)


def _relay() -> Relay:
    cfg = settings.load_settings(kafka__dlq_topic="dlq")
    return Relay(cfg, RelaySettings(instance="t"), Shutdown())


async def _queue(row: Row, producer: Producer | None = None) -> Producer:
    producer = producer or Producer()
    await _relay()._queue(producer, row, [])  # type: ignore[arg-type]
    return producer


def _header(headers: list[tuple[str, bytes]], name: str) -> list[str]:
    return [v.decode() for k, v in headers if k == name]


async def test_on_the_record_carries_its_publish_span_a_child_of_the_row(spans):
    row = _row(STORED)
    producer = await _queue(row)
    (span,) = spans.get_finished_spans()
    assert span.name == "publish out"
    assert span.kind == SpanKind.PRODUCER
    assert span.context.trace_id == TRACE
    assert span.parent is not None and span.parent.span_id == SPAN
    attrs = span.attributes or {}
    assert attrs["messaging.system"] == "kafka"
    assert attrs["messaging.destination.name"] == "out"
    assert attrs["ingest.outbox_id"] == "task-1"
    ((topic, headers),) = producer.sent
    assert topic == "out"
    assert _header(headers, "traceparent") == [f"00-{TRACE:032x}-{span.context.span_id:016x}-01"]
    assert _header(headers, "task_id") == ["task-1"]
    assert _header(row.headers, "traceparent") == [STORED], "the row itself is left as read"


async def test_off_the_record_carries_the_stored_traceparent_and_no_span(spans, monkeypatch):
    monkeypatch.setattr(tracing, "ENABLED", False)
    producer = await _queue(_row(STORED))
    assert list(spans.get_finished_spans()) == []
    ((_, headers),) = producer.sent
    assert _header(headers, "traceparent") == [STORED]


async def test_a_row_without_a_trace_makes_no_span_and_no_header(spans):
    producer = await _queue(_row(None))
    assert list(spans.get_finished_spans()) == []
    ((_, headers),) = producer.sent
    assert _header(headers, "traceparent") == []


async def test_a_message_with_its_own_traceparent_keeps_it(spans):
    own = f"00-{'ab' * 16}-{'cd' * 8}-01"
    row = _row(STORED, [("task_id", b"task-1"), ("traceparent", own.encode())])
    assert _header(row.headers, "traceparent") == [own]
    await _queue(row)
    (span,) = spans.get_finished_spans()
    assert span.context.trace_id == int("ab" * 16, 16)


async def test_a_dead_lettered_row_keeps_its_trace(spans):
    relay = _relay()
    row = _row(STORED)
    relay.verdicts._rows[(row.position, row.id)] = Refused(Stage.DLQ, "outbox_too_large", "x")
    producer = Producer()
    await relay._queue(producer, row, [])  # type: ignore[arg-type]
    (span,) = spans.get_finished_spans()
    assert span.name == "publish dlq"
    ((topic, headers),) = producer.sent
    assert topic == "dlq"
    assert _header(headers, "traceparent")[0].split("-")[1] == f"{TRACE:032x}"


async def test_a_send_that_raises_ends_its_span_in_error(spans):
    with pytest.raises(RuntimeError):
        await _queue(_row(STORED), Producer(refuse=RuntimeError("broker away")))
    (span,) = spans.get_finished_spans()
    assert span.status.status_code == StatusCode.ERROR
