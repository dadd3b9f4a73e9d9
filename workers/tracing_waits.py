"""Waits inside workflows as spans (issue 37; docs/tracing.md): workflow code.

A workflow cannot hold a span open across a wait (it may be evicted, and replayed on
another worker, hours later), so a wait that ends is recorded as a **zero-length span**
at the moment it ends, its length in the attribute ``ingest.wait_seconds`` (workflow
time, ``workflow.now()``), plus what was waited on:

* ``wait approval``: an approval's wait ended (``workers/approvals/machine.py``): a
  decision, an auto-rejection, an expiry, a cancellation or a failure
  (``ingest.approval_id``, ``ingest.outcome``, ``ingest.decision``, ``ingest.round``,
  ``ingest.decided_by``);
* ``wait permit``: a task got its permit (``workers/permits/scope.py``)
  (``ingest.permit_resource``, ``ingest.permit_slot``, ``ingest.task_id``);
* ``wait flow_slot``: a queued run got its concurrency slot (``workers/flow/slot.py``)
  (``ingest.flow_resource``, ``ingest.flow_key``, ``ingest.flow_limit``, ``ingest.rounds``);
* ``wait flow_window``: a debounce or batch window closed (``workers/flow/window.py``)
  (``ingest.window_id``, ``ingest.window_kind``, ``ingest.closed_by``, ``ingest.flow_key``).

The span is made by ``temporalio.contrib.opentelemetry.workflow.completed_span``: a
child of the workflow's context (the TracingInterceptor's), written only when the
workflow is not replaying, so a replay, a worker restart or a cache eviction never
writes it twice, and it issues no command (histories are the same with tracing on or
off). Off (``pipeline.tracing.ENABLED`` False) :func:`waited` returns at its first
line, and ``temporalio.contrib.opentelemetry`` (which loads the SDK) is not imported.
A workflow started by an untraced client has no span to hang it on: nothing then.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from temporalio import workflow

from pipeline import tracing

WAIT_SECONDS = "ingest.wait_seconds"
APPROVAL = "wait approval"
PERMIT = "wait permit"
FLOW_SLOT = "wait flow_slot"
FLOW_WINDOW = "wait flow_window"


def waited(
    name: str, seconds: float | None = None, *, since: datetime | str | None = None, **attrs: Any
) -> None:
    """Record the end of a wait of ``seconds`` (or since ``since``, workflow time, a
    datetime or its ISO-8601 text) as the
    zero-length span ``name`` with ``ingest.<attr>`` attributes (None values left out).

    Workflow code only; nothing when tracing is off, on replay, or without a trace."""
    if not tracing.ENABLED:
        return
    if workflow.unsafe.is_replaying():
        return
    with workflow.unsafe.imports_passed_through():
        from opentelemetry import trace
        from temporalio.contrib.opentelemetry.workflow import completed_span
    # No context from the client (untraced), or no interceptor on this worker: the
    # fallback of completed_span would record outside the workflow's trace, even on replay.
    if not trace.get_current_span().get_span_context().is_valid:
        return
    if seconds is None:
        start = datetime.fromisoformat(since) if isinstance(since, str) else since
        seconds = (workflow.now() - start).total_seconds() if start is not None else 0.0
    attributes: dict[str, Any] = {WAIT_SECONDS: max(0.0, float(seconds))}
    attributes.update({f"ingest.{k}": v for k, v in attrs.items() if v is not None})
    completed_span(name, attributes=attributes)
