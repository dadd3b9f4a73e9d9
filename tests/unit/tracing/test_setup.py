"""Tracing's settings: off by default, OTEL_* variables it cannot honour refused by name,
and JSON log lines that carry the ids of the span they were written in."""

from __future__ import annotations

import io
import logging

import orjson
import pytest

from pipeline import logs, tracing
from pipeline.settings import ConfigError, ProcessSettings


def test_off_by_default(monkeypatch):
    monkeypatch.delenv("INGEST_TRACING", raising=False)
    assert ProcessSettings().tracing is False
    assert tracing.setup(False, "router") is False


@pytest.mark.parametrize(
    ("var", "value"),
    [("OTEL_TRACES_EXPORTER", "zipkin"), ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")],
)
def test_an_exporter_it_cannot_honour_fails_naming_the_variable(monkeypatch, var, value):
    monkeypatch.setenv(var, value)
    with pytest.raises(ConfigError, match=var):
        tracing._exporter()


def test_otel_sdk_disabled_wins(monkeypatch):
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    assert tracing.setup(True, "router") is False


def test_json_logs_carry_the_current_spans_ids(spans):
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(logs._JsonFormatter())
    logger = logging.getLogger("test.tracing.json")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        logger.warning("outside")
        with tracing.child("work") as span:
            assert span is not None
            logger.warning("inside")
    finally:
        logger.removeHandler(handler)
    outside, inside = (orjson.loads(line) for line in out.getvalue().splitlines())
    assert "trace_id" not in outside
    assert inside["trace_id"] == format(span.get_span_context().trace_id, "032x")
    assert inside["span_id"] == format(span.get_span_context().span_id, "016x")
