"""Every routing decision leaves its span, in the trace of the event (in-memory exporter).

Routing's Temporal, PostgreSQL and Kafka sides are fakes (pure logic): what is tested is
the span tree and its attributes. The same path on the real stack and a real Jaeger:
tests/integration/test_trace_end_to_end.py.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import orjson
from aiokafka.structs import ConsumerRecord
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from pipeline import tracing
from pipeline.starter import DUPLICATE, STARTED, StartRejected
from router.flow.gate import START, Decision
from router.flow.windows import ABSORBED, ASSIGNED
from router.routing import RoutePlanner, Routing
from tests.unit.router.test_routing_failures import AID, Catalog  # the same one-activity fake

PARENT_TRACE = 0x0AF7651916CD43DD8448EB211C80319C
PARENT_SPAN = 0xB7AD6B7169203331
TRACEPARENT = f"00-{PARENT_TRACE:032x}-{PARENT_SPAN:016x}-01"


@dataclass
class Producer:
    sent: list[dict[str, bytes]] = field(default_factory=list)

    async def send_and_wait(self, topic: str, value: Any, key: Any = None, headers: Any = ()):
        self.sent.append(dict(headers))


@dataclass
class Starter:
    outcome: str = STARTED
    reject: bool = False

    async def start(self, run: Any, **_: Any) -> str:
        await asyncio.sleep(0)
        if self.reject:
            raise StartRejected("namespace says no")
        return self.outcome


@dataclass
class Gate:
    decision: Decision = START

    async def decide(self, run: Any, keys: Any) -> Decision:
        return self.decision


@dataclass
class Ledger:
    seen_all: bool = False

    async def seen(self, wids: list[str]) -> set[str]:
        return set(wids) if self.seen_all else set()


@dataclass
class Windows:
    answer: str = ASSIGNED

    def wants(self, activity_id: str) -> bool:
        return True

    async def add(self, msg: Any, run: Any) -> str:
        return self.answer


def _msg(eid: str, *, traced: bool = True, etype: str = "t", value: bytes | None = None):
    body = (
        value if value is not None else orjson.dumps({"event_id": eid, "type": etype, "data": {}})
    )
    headers = [("traceparent", TRACEPARENT.encode())] if traced else []
    return ConsumerRecord("ev", 3, 41, 0, 0, None, body, None, len(body), len(body), headers)


async def _route(msg: ConsumerRecord, **parts: Any) -> Producer:
    producer = Producer()
    routing = Routing(
        planner=RoutePlanner(Catalog(), 1_000_000),  # type: ignore[arg-type]
        starter=parts.get("starter", Starter()),
        producer=producer,  # type: ignore[arg-type]
        dlq_topic="dlq",
        ledger=parts.get("ledger"),
        concurrency=2,
        on_done=lambda tp, off: None,
        stopping=lambda: False,
        gate=parts.get("gate"),
        windows=parts.get("windows"),
        group="ingest-router",
    )
    await asyncio.gather(*await routing.submit([msg]))
    return producer


def _tree(spans: InMemorySpanExporter) -> tuple[ReadableSpan, list[ReadableSpan]]:
    finished = list(spans.get_finished_spans())
    roots = [s for s in finished if s.name == "process ev"]
    assert len(roots) == 1, [s.name for s in finished]
    root = roots[0]
    children = [
        s for s in finished if s.parent is not None and s.parent.span_id == root.context.span_id
    ]
    return root, children


def _decision(spans: InMemorySpanExporter) -> ReadableSpan:
    _, children = _tree(spans)
    assert len(children) == 1, [c.name for c in children]
    return children[0]


async def test_a_started_run_is_a_child_of_the_context_its_record_carries(spans):
    await _route(_msg("e1"))
    root, _ = _tree(spans)
    assert root.context.trace_id == PARENT_TRACE
    assert root.parent is not None and root.parent.span_id == PARENT_SPAN
    assert not root.links  # the parent is the creation context; no second reference
    attrs = root.attributes or {}
    assert attrs["messaging.system"] == "kafka"
    assert attrs["messaging.destination.name"] == "ev"
    assert attrs["messaging.destination.partition.id"] == "3"
    assert attrs["messaging.kafka.message.offset"] == 41
    assert attrs["messaging.consumer.group.name"] == "ingest-router"
    span = _decision(spans)
    assert span.name == "route started"
    assert span.attributes is not None
    assert span.attributes["ingest.decision"] == "started"
    assert span.attributes["ingest.activity_id"] == AID
    assert span.attributes["ingest.workflow_id"] == f"activity-{AID}:e1"
    assert span.attributes["ingest.event_id"] == "e1"


async def test_a_ledger_duplicate_names_its_layer(spans):
    await _route(_msg("e2"), ledger=Ledger(seen_all=True))
    span = _decision(spans)
    assert span.name == "route duplicate"
    assert (span.attributes or {})["ingest.duplicate_layer"] == "ledger"


async def test_a_temporal_duplicate_names_its_layer(spans):
    await _route(_msg("e3"), starter=Starter(outcome=DUPLICATE))
    span = _decision(spans)
    assert span.name == "route duplicate"
    assert (span.attributes or {})["ingest.duplicate_layer"] == "temporal"


async def test_a_throttled_start_records_its_delay(spans):
    await _route(_msg("e4"), gate=Gate(Decision(start_delay=timedelta(seconds=2.5))))
    span = _decision(spans)
    assert span.name == "route throttled"
    assert (span.attributes or {})["ingest.delay_seconds"] == 2.5


async def test_a_skip_records_its_reason(spans):
    await _route(_msg("e5"), gate=Gate(Decision(skip="rate_limit")))
    span = _decision(spans)
    assert span.name == "route skipped"
    assert (span.attributes or {})["ingest.skip_reason"] == "rate_limit"


async def test_a_windowed_event_and_an_absorbed_one(spans):
    await _route(_msg("e6"), windows=Windows(ASSIGNED))
    assert _decision(spans).name == "route windowed"
    spans.clear()
    await _route(_msg("e6"), windows=Windows(ABSORBED))
    span = _decision(spans)
    assert span.name == "route duplicate"
    assert (span.attributes or {})["ingest.duplicate_layer"] == "flow_window"


async def test_a_rejected_start_is_dead_lettered_on_the_message_span(spans):
    producer = await _route(_msg("e7"), starter=Starter(reject=True))
    root, children = _tree(spans)
    assert [c.name for c in children] == ["route rejected"]
    assert root.name == "process ev"
    attrs = root.attributes or {}
    assert attrs["ingest.decision"] == "dead_lettered"
    assert attrs["ingest.dlq_reason"] == "start_rejected"
    assert root.status.status_code == StatusCode.ERROR
    assert len(producer.sent) == 1


async def test_a_malformed_event_is_dead_lettered_with_its_reason(spans):
    await _route(_msg("x", value=b"{not json"))
    root, children = _tree(spans)
    assert children == []
    assert (root.attributes or {})["ingest.dlq_reason"] == "not_json"
    assert root.status.status_code == StatusCode.ERROR


async def test_an_event_without_a_traceparent_gets_the_trace_of_its_event_id(spans):
    await _route(_msg("e8", traced=False))
    first, _ = _tree(spans)
    assert first.parent is None
    assert first.context.trace_id == tracing.trace_id_for("e8")
    spans.clear()
    await _route(_msg("e8", traced=False))  # a redelivery: the same trace
    again, _ = _tree(spans)
    assert again.context.trace_id == first.context.trace_id


async def test_off_makes_no_span(spans, monkeypatch):
    monkeypatch.setattr(tracing, "ENABLED", False)
    await _route(_msg("e9"))
    assert list(spans.get_finished_spans()) == []
