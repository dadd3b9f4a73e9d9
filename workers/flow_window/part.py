"""Debounce and batch windows as a worker part (see ``workers.parts``)."""

from __future__ import annotations

from workers.flow_window import dead_letters
from workers.flow_window.activities import FlowWindowActivities
from workers.flow_window.workflow import FlowWindowWorkflow
from workers.parts import PartDeps, WorkerPart

WORKFLOW_MODULES = ("workers.flow_window.workflow",)


def flow_window_part(deps: PartDeps) -> WorkerPart:
    """``FlowWindowWorkflow`` and its ``close_window`` activity, on the runs' task queue.

    A window no run can take goes to the DLQ topic through the outbox (``ingest relay``
    publishes it): ``workers.flow_window.dead_letters``."""
    dead_letters.start_metrics_at_zero()
    acts = FlowWindowActivities(
        deps.pool,
        deps.client,
        deps.settings.temporal.task_queue,
        deps.settings.kafka.dlq_topic,
    )
    return WorkerPart(
        "flow-windows", (FlowWindowWorkflow,), acts.all(), passthrough=WORKFLOW_MODULES
    )
