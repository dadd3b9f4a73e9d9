"""The stack's Jaeger (``ingest stack up --tracing``): spans sent with the OpenTelemetry
SDK over OTLP/HTTP come back from its query API, a trace it lacks is an error, and the
real Temporal server started with tracing on sends it its own spans."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest
from devstack.postgres import Postgres
from devstack.temporal_server import TemporalServer
from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
from temporalio.client import Client

from pipeline import tracing
from tests.support import jaeger as support
from tests.support.jaeger import (
    JaegerClient,
    Trace,
    TraceNotFound,
    service_of,
    spans,
    summary,
    tags,
)
from tests.support.temporal_server import discard, private_server

jaeger = support.jaeger  # the session fixture


def test_a_span_sent_over_otlp_http_comes_back_from_the_query_api(jaeger: JaegerClient) -> None:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    service = f"ingest-test-{uuid.uuid4().hex[:8]}"
    finished = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(SimpleSpanProcessor(finished))
    tracer = provider.get_tracer("tests.integration.test_jaeger_stack")
    with tracer.start_as_current_span("route") as parent:
        with tracer.start_as_current_span("start run") as child:
            child.set_attribute("ingest.event_id", "e-1")
    provider.shutdown()

    # Exported here, not in a background thread, so a refused export fails the test.
    exporter = OTLPSpanExporter(endpoint=f"{jaeger.otlp_endpoint}/v1/traces", timeout=10)
    assert exporter.export(finished.get_finished_spans()) is SpanExportResult.SUCCESS
    exporter.shutdown()

    trace_id = f"{parent.get_span_context().trace_id:032x}"
    trace = jaeger.wait_trace(trace_id, lambda t: len(t["spans"]) == 2, timeout=30)
    by_name = {s["operationName"]: s for s in spans(trace)}
    assert set(by_name) == {"route", "start run"}
    assert {service_of(trace, s) for s in spans(trace)} == {service}
    parent_id = f"{parent.get_span_context().span_id:016x}"
    assert by_name["route"]["spanID"] == parent_id
    assert [(r["refType"], r["spanID"]) for r in by_name["start run"]["references"]] == [
        ("CHILD_OF", parent_id)
    ]
    assert tags(by_name["start run"])["ingest.event_id"] == "e-1"
    assert service in jaeger.services()


def test_a_trace_jaeger_does_not_have_raises_and_wait_says_what_it_saw(
    jaeger: JaegerClient,
) -> None:
    missing = uuid.uuid4().hex
    with pytest.raises(TraceNotFound, match="404"):
        jaeger.trace(missing)
    with pytest.raises(AssertionError, match=r"last seen: .*404"):
        jaeger.wait_trace(missing, lambda t: True, timeout=1)


def test_the_real_servers_spans_join_the_callers_trace(
    stack: object,
    jaeger: JaegerClient,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``INGEST_STACK_TRACING`` starts the real server with the OTLP variables its
    ``common/telemetry`` reads; a call made inside a span with
    :func:`pipeline.tracing.grpc_metadata` (what the router's starts send) puts the
    server's own frontend span in the caller's trace."""
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    if tracing._provider is None:  # tracing on in this process; its own spans stay here
        assert tracing.setup(True, "test", exporter=InMemorySpanExporter())
    monkeypatch.setattr(tracing, "ENABLED", True)
    untraced = private_server(tmp_path, shape="single")
    server = TemporalServer(untraced.cfg.model_copy(update={"tracing": True}))
    try:
        server.ensure()
        frontend = server.procs()[0][1].pid()
        assert frontend is not None

        async def describe() -> str:
            client = await Client.connect(server.address, namespace="default")
            with tracing.child("route") as span:
                assert span is not None
                metadata = tracing.grpc_metadata()
                assert "traceparent" in metadata
                await client.service_client.workflow_service.describe_namespace(
                    DescribeNamespaceRequest(namespace="default"), metadata=metadata
                )
            return f"{span.get_span_context().trace_id:032x}"

        trace_id = asyncio.run(describe())

        def joined(trace: Trace) -> bool:
            return any(
                service_of(trace, s) == "io.temporal.frontend"
                and s["operationName"].endswith("/DescribeNamespace")
                for s in support.spans(trace)
            )

        trace = jaeger.wait_trace(trace_id, joined, timeout=30)
        procs = [
            p for p in trace["processes"].values() if p["serviceName"] == "io.temporal.frontend"
        ]
        assert any(
            {"key": "process.pid", "type": "int64", "value": frontend} in p["tags"] for p in procs
        ), f"the span is this server's: {summary(trace)}"
    finally:
        asyncio.run(discard(server, Postgres(server.cfg).url))
