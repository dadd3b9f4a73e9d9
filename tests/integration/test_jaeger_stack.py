"""The stack's Jaeger (``ingest stack up --tracing``): spans sent with the OpenTelemetry
SDK over OTLP/HTTP come back from its query API, a trace it lacks is an error, and the
real Temporal server started with tracing on sends it its own spans."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path

import pytest
from devstack.postgres import Postgres
from devstack.temporal_server import TemporalServer
from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
from temporalio.client import Client

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


def test_the_real_server_exports_its_own_spans_when_tracing_is_on(
    stack: object, jaeger: JaegerClient, tmp_path: Path
) -> None:
    """``INGEST_STACK_TRACING`` starts the real server with the OTLP variables its
    ``common/telemetry`` reads, so its frontend's spans (this process's) reach Jaeger."""
    untraced = private_server(tmp_path, shape="single")
    server = TemporalServer(untraced.cfg.model_copy(update={"tracing": True}))
    try:
        server.ensure()
        frontend = server.procs()[0][1].pid()
        assert frontend is not None

        async def describe() -> None:
            client = await Client.connect(server.address, namespace="default")
            await client.service_client.workflow_service.describe_namespace(
                DescribeNamespaceRequest(namespace="default")
            )

        asyncio.run(describe())

        def ours(trace: Trace) -> bool:
            return any(
                p["serviceName"] == "io.temporal.frontend"
                and {"key": "process.pid", "type": "int64", "value": frontend} in p["tags"]
                for p in trace["processes"].values()
            ) and any(s["operationName"].endswith("/DescribeNamespace") for s in spans(trace))

        deadline = time.monotonic() + 30
        seen: list[list[str]] = []
        while not any(ours(t) for t in jaeger.find_traces("io.temporal.frontend", limit=200)):
            seen = [summary(t) for t in jaeger.find_traces("io.temporal.frontend", limit=3)]
            assert time.monotonic() < deadline, (
                f"no DescribeNamespace span of pid {frontend}: {seen}"
            )
            time.sleep(0.5)
    finally:
        asyncio.run(discard(server, Postgres(server.cfg).url))
