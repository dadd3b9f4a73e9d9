"""Ingress's span per raw record (tracing on): the start of the event's trace.

Each raw record gets a ``process <raw topic>`` span, a child of the ``traceparent`` its
producer wrote (and linked to it), or, without one, the root of a trace whose id
derives from the event's id (so a redelivery lands in the same trace). The span's
context replaces the W3C headers of what ingress sends: the stamped event, or the
record's DLQ copy. Off (``pipeline.tracing.ENABLED`` False), the producer's headers
pass through untouched and nothing here runs.
"""

from __future__ import annotations

from opentelemetry.trace import Status, StatusCode

from ingress.records import COMPONENT, Outgoing
from pipeline import tracing


def trace_records(records: list[Outgoing], group: str) -> None:
    """Open and close one span per record and write its context on the record."""
    for out in records:
        msg = out.source
        event_id = out.key.decode() if out.reason is None and out.key else None
        attrs = {"ingest.component": COMPONENT, "ingest.outcome": out.reason or "stamped"}
        if event_id is not None:
            attrs["ingest.event_id"] = event_id
            attrs["ingest.stamp"] = out.label or ""
        with tracing.consumed(
            f"process {msg.topic}",
            msg,
            group,
            event_id=event_id or f"{msg.topic}/{msg.partition}/{msg.offset}",
            attributes=attrs,
        ) as span:
            if out.reason is not None:
                span.set_attribute("ingest.dlq_reason", out.reason)
                span.set_status(Status(StatusCode.ERROR, out.reason))
            tracing.inject(out.headers)
