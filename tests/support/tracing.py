"""Tracing on, in this process, with the SDK's in-memory exporter, for one test at a time.

OpenTelemetry allows one provider per process: the first of these fixtures installs it
(``pipeline.tracing.setup``), or, when something else installed it first, adds this
exporter to it. Between tests ``pipeline.tracing.ENABLED`` is False again, so no other
test makes spans. A conftest imports ``_memory`` and ``spans`` to offer them.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from pipeline import tracing


@pytest.fixture(scope="session")
def _memory() -> InMemorySpanExporter:
    exporter = InMemorySpanExporter()
    if tracing._provider is None:
        assert tracing.setup(True, "test", exporter=exporter)
    else:
        tracing._provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.ENABLED = False
    return exporter


@pytest.fixture
def spans(
    _memory: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> Iterator[InMemorySpanExporter]:
    _memory.clear()
    monkeypatch.setattr(tracing, "ENABLED", True)
    yield _memory
    _memory.clear()
