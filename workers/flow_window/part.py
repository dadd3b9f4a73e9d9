"""Debounce and batch windows as a worker part (see ``workers.parts``)."""

from __future__ import annotations

from workers.flow_window.activities import FlowWindowActivities
from workers.flow_window.workflow import FlowWindowWorkflow
from workers.parts import PartDeps, WorkerPart

WORKFLOW_MODULES = ("workers.flow_window.workflow",)


def flow_window_part(deps: PartDeps) -> WorkerPart:
    """``FlowWindowWorkflow`` and its ``close_window`` activity, on the runs' task queue."""
    acts = FlowWindowActivities(deps.pool, deps.client, deps.settings.temporal.task_queue)
    return WorkerPart(
        "flow-windows", (FlowWindowWorkflow,), acts.all(), passthrough=WORKFLOW_MODULES
    )
