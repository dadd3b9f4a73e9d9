"""OpenTelemetry traces: one event followed from its producer to its last task.

Off unless ``INGEST_TRACING=1`` (docs/tracing.md). Off, every helper here returns at
its first line (``ENABLED`` is False) and nothing is imported beyond the API: no
provider, no exporter thread, no header written. On, the standard ``OTEL_*``
variables configure it: ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or ``..._TRACES_ENDPOINT``),
``OTEL_SERVICE_NAME`` (default ``ingest-<component>``), ``OTEL_TRACES_SAMPLER`` and
``..._ARG``, ``OTEL_RESOURCE_ATTRIBUTES``, and ``OTEL_TRACES_EXPORTER`` (``otlp``, the
default, over HTTP/protobuf; ``console``; or ``none``, which propagates without
exporting).

How one event's trace is formed (W3C ``traceparent``/``tracestate`` in record headers):

* **Kafka hops** (ingress, router, relay) follow OpenTelemetry's messaging
  conventions for single-message processing, which allow the creation context as the
  processing span's parent: the producer, ingress, router, workflow, tasks and relay
  are one trace, the question an SRE asks ("what happened to my event?") answered by
  one trace id. (A link instead of a parent would split it into one trace per hop.)
  Ingress writes its own span's context on the stamped event and on a DLQ record.
* **An event that arrives without a traceparent** gets a trace id derived from its
  ``event_id`` (:func:`trace_id_for`): a redelivery of the raw record, and an
  ``ingest replay`` of it, land in the same trace as the first delivery.
* **Temporal**: ``temporalio.contrib.opentelemetry.TracingInterceptor`` on the client
  (and so on the worker that uses it) carries the context in a workflow header; the
  router starts each workflow inside its decision span. Chosen over the SDK's
  ``OpenTelemetryPlugin``, which is marked experimental and shows a workflow's spans
  only once it completes: a run held for hours on an approval would show nothing.
  Waits inside a workflow are zero-length spans with their duration as an attribute
  (:func:`workers.tracing_waits`), written once, never on replay.
"""

from __future__ import annotations

import contextvars
import hashlib
import logging
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.propagators.textmap import Getter
from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from pipeline.settings import ConfigError

log = logging.getLogger(__name__)

ENABLED = False
TRACEPARENT = "traceparent"
TRACESTATE = "tracestate"
_HEADERS = (TRACEPARENT, TRACESTATE)
_PROPAGATOR = TraceContextTextMapPropagator()
_EXPORTERS = ("otlp", "console", "none")
# The trace id the next root span takes (an event without a traceparent), else random.
_next_trace_id: contextvars.ContextVar[int | None] = contextvars.ContextVar(
    "ingest_next_trace_id", default=None
)
_provider: Any = None


class TracingConfigError(ConfigError):
    """An OTEL_* variable the pipeline cannot honour; the message names it."""


class _RecordHeaders(Getter[Sequence[tuple[str, bytes]]]):
    """Reads W3C headers from Kafka record headers (a sequence of name, bytes)."""

    def get(self, carrier: Sequence[tuple[str, bytes]], key: str) -> list[str] | None:
        found = [bytes(v).decode("latin-1") for k, v in carrier or () if k == key and v]
        return found or None

    def keys(self, carrier: Sequence[tuple[str, bytes]]) -> list[str]:
        return [k for k, _ in carrier or ()]


_GETTER = _RecordHeaders()


def setup(enabled: bool, component: str, exporter: Any = None) -> bool:
    """Install the tracer provider once per process when ``enabled``; True if on.

    ``exporter``: a span exporter to use instead of ``OTEL_TRACES_EXPORTER``'s (tests
    pass the SDK's in-memory one); it is flushed span by span. Raises
    :class:`TracingConfigError` for an exporter or protocol it cannot honour.
    """
    global ENABLED, _provider
    if not enabled or os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    if _provider is not None:
        ENABLED = True
        return True
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
    from opentelemetry.sdk.trace.id_generator import RandomIdGenerator

    class EventTraceIds(RandomIdGenerator):
        def generate_trace_id(self) -> int:
            return _next_trace_id.get() or super().generate_trace_id()

    attrs: dict[str, str] = {"ingest.component": component}
    if not os.environ.get("OTEL_SERVICE_NAME"):
        attrs[SERVICE_NAME] = f"ingest-{component}"
    provider = TracerProvider(resource=Resource.create(attrs), id_generator=EventTraceIds())
    if exporter is not None:
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    elif (made := _exporter()) is not None:
        provider.add_span_processor(BatchSpanProcessor(made))
    trace.set_tracer_provider(provider)
    _provider = provider
    ENABLED = True
    log.info(
        "tracing on: service %s, exporter %s",
        provider.resource.attributes.get(SERVICE_NAME),
        "given" if exporter is not None else os.environ.get("OTEL_TRACES_EXPORTER", "otlp"),
    )
    return True


def _exporter() -> Any:
    kind = (os.environ.get("OTEL_TRACES_EXPORTER") or "otlp").strip().lower()
    if kind not in _EXPORTERS:
        raise TracingConfigError(
            f"OTEL_TRACES_EXPORTER={kind!r} is not supported here (one of {', '.join(_EXPORTERS)})"
        )
    if kind == "none":
        return None
    if kind == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter()
    for var in ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"):
        proto = os.environ.get(var, "").strip()
        if proto and proto != "http/protobuf":
            raise TracingConfigError(
                f"{var}={proto!r}: the pipeline exports OTLP over http/protobuf only "
                "(port 4318 on a collector or Jaeger)"
            )
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter()


def shutdown(flush_seconds: float = 5.0) -> None:
    """Export what is buffered (for at most ``flush_seconds``) and stop the exporter;
    nothing when off. Called on the way out (``app.dispatch.end_process``): a process
    ends with ``os._exit``, which runs no atexit hook, the SDK's own flush included."""
    if _provider is None:
        return
    try:
        _provider.force_flush(int(flush_seconds * 1000))
        _provider.shutdown()
    except Exception as exc:  # an exporter that fails on the way out must not change the exit
        log.warning("tracing: flushing spans on exit failed: %s", exc)


def tracer() -> trace.Tracer:
    return trace.get_tracer("ingest")


def temporal_interceptors() -> list[Any]:
    """What a Temporal client carries so its workflows, children and activities join
    the caller's trace: nothing when off."""
    if not ENABLED:
        return []
    from temporalio.contrib.opentelemetry import TracingInterceptor

    return [TracingInterceptor(tracer())]


def trace_id_for(key: str) -> int:
    """A stable, valid 128-bit trace id for ``key`` (an event id)."""
    return int.from_bytes(hashlib.blake2b(key.encode(), digest_size=16).digest(), "big") or 1


def record_context(headers: Sequence[tuple[str, bytes]] | None) -> otel_context.Context | None:
    """The context a Kafka record carries in its W3C headers, or None."""
    if not headers:
        return None
    ctx = _PROPAGATOR.extract(headers, getter=_GETTER)
    if not trace.get_current_span(ctx).get_span_context().is_valid:
        return None
    return ctx


def inject(headers: list[tuple[str, bytes]]) -> None:
    """Replace the W3C headers in ``headers`` by the current span's context."""
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier)
    if not carrier:
        return
    headers[:] = [(k, v) for k, v in headers if k not in _HEADERS]
    headers.extend((k, v.encode("latin-1")) for k, v in carrier.items())


def kafka_attributes(msg: Any, group: str | None, operation: str = "process") -> dict[str, Any]:
    """OpenTelemetry's messaging attributes of one consumed record."""
    attrs: dict[str, Any] = {
        "messaging.system": "kafka",
        "messaging.operation.type": operation,
        "messaging.destination.name": msg.topic,
        "messaging.destination.partition.id": str(msg.partition),
        "messaging.kafka.message.offset": msg.offset,
    }
    if group:
        attrs["messaging.consumer.group.name"] = group
    return attrs


@contextmanager
def consumed(
    name: str,
    msg: Any,
    group: str | None,
    *,
    event_id: str | None = None,
    links: Sequence[Link] = (),
    attributes: dict[str, Any] | None = None,
) -> Iterator[Span]:
    """The current span while one consumed record is processed.

    A child of the context the record carries (no link to it as well: Jaeger shows a
    span that is both as a link only); without one, the root of a trace whose id
    derives from ``event_id`` (random without it). ``links``: other contexts it relates
    to (a replay's session).
    """
    parent = record_context(msg.headers)
    attrs = kafka_attributes(msg, group)
    if attributes:
        attrs.update(attributes)
    token = None
    if parent is None and event_id:
        token = _next_trace_id.set(trace_id_for(event_id))
    try:
        span = tracer().start_span(
            name,
            context=parent or otel_context.Context(),
            kind=SpanKind.CONSUMER,
            attributes=attrs,
            links=list(links),
        )
    finally:
        if token is not None:
            _next_trace_id.reset(token)
    with trace.use_span(
        span, end_on_exit=True, record_exception=True, set_status_on_exception=True
    ):
        yield span


@contextmanager
def child(name: str, **attrs: Any) -> Iterator[Span | None]:
    """A child span of the current one with ``ingest.*`` attributes; None when off."""
    if not ENABLED:
        yield None
        return
    given = {f"ingest.{k}": v for k, v in attrs.items() if v is not None}
    with tracer().start_as_current_span(name, attributes=given) as span:
        yield span


def links_to(span: Span | None) -> list[Link]:
    """A link to ``span`` (for the spans it caused in other traces); [] when None."""
    return [] if span is None else [Link(span.get_span_context(), {"ingest.link": "replay"})]


def decide(span: Span | None, decision: str, *, rename: bool = True, **attrs: Any) -> None:
    """Record a routing decision and its attributes (``ingest.*``) on ``span``, named
    ``route <decision>`` unless ``rename`` is False; nothing when ``span`` is None."""
    if span is None:
        return
    if rename:
        span.update_name(f"route {decision}")
    span.set_attribute("ingest.decision", decision)
    for key, value in attrs.items():
        if value is not None:
            span.set_attribute(f"ingest.{key}", value)
    if decision == "dead_lettered":
        span.set_status(Status(StatusCode.ERROR, str(attrs.get("dlq_reason", ""))))


def current() -> Span | None:
    """The current span when tracing is on, else None."""
    return trace.get_current_span() if ENABLED else None


def current_ids() -> tuple[str, str] | None:
    """``(trace_id, span_id)`` in hex of the current span, or None (off, or no span)."""
    if not ENABLED:
        return None
    ctx = trace.get_current_span().get_span_context()
    if not ctx.is_valid:
        return None
    return format(ctx.trace_id, "032x"), format(ctx.span_id, "016x")


def current_traceparent() -> str | None:
    """The current span's W3C traceparent (stored beside rows the relay publishes)."""
    if not ENABLED:
        return None
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier)
    return carrier.get(TRACEPARENT)


_NO_METADATA: dict[str, str] = {}


def grpc_metadata() -> dict[str, str]:
    """The current span's W3C headers as gRPC metadata (a Temporal call's
    ``rpc_metadata``, which the server's own tracing reads); empty when off."""
    if not ENABLED:
        return _NO_METADATA
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier)
    return carrier


@contextmanager
def producing(topic: str, headers: list[tuple[str, bytes]], **attrs: Any) -> Iterator[Span | None]:
    """The PRODUCER span ``publish <topic>`` of one record about to be sent, a child of the
    context its ``headers`` carry (a traceparent stored with it, e.g. an outbox row's),
    current for the body; its own context replaces the W3C headers in ``headers`` (a list
    the caller owns). None, and ``headers`` untouched, when off or when they carry none.
    ``attrs`` become ``ingest.*`` attributes."""
    if not ENABLED:
        yield None
        return
    parent = record_context(headers)
    if parent is None:
        yield None
        return
    attributes: dict[str, Any] = {
        "messaging.system": "kafka",
        "messaging.operation.type": "send",
        "messaging.operation.name": "publish",
        "messaging.destination.name": topic,
    }
    attributes.update({f"ingest.{k}": v for k, v in attrs.items() if v is not None})
    span = tracer().start_span(
        f"publish {topic}", context=parent, kind=SpanKind.PRODUCER, attributes=attributes
    )
    with trace.use_span(
        span, end_on_exit=True, record_exception=True, set_status_on_exception=True
    ):
        inject(headers)
        yield span
