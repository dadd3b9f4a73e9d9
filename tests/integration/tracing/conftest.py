"""Tracing on, in this process, with the SDK's in-memory exporter, for one test at a time
(as tests/unit/tracing/conftest.py does), and a Temporal client that carries the tracing
interceptor (what ``pipeline.clients.temporal_client`` gives a traced process).

OpenTelemetry allows one provider per process: when another suite's fixture installed
it first, this exporter is added to it. Between tests ``pipeline.tracing.ENABLED`` is
False again, so no other test makes spans.
"""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from temporalio.client import Client
from temporalio.contrib.opentelemetry import TracingInterceptor

from pipeline import tracing
from tests.support.tracing import _memory, spans  # noqa: F401 (fixtures)


@pytest.fixture
def traced_temporal(temporal: Client, spans: InMemorySpanExporter) -> Client:  # noqa: F811
    """The session's client plus the tracing interceptor (the worker built on it gets
    the interceptor's workflow and activity sides too)."""
    config = temporal.config()
    config["interceptors"] = [*config["interceptors"], TracingInterceptor(tracing.tracer())]
    return Client(**config)
