"""The operator service's gauges of paused tasks (docs/metrics.md), labelled by activity."""

from __future__ import annotations

from prometheus_client import Gauge

from pipeline.metrics import data_labelled

TASKS_PENDING_FIX = Gauge(
    "pipeline_tasks_pending_fix",
    "Tasks paused as pending_fix, waiting for an operator (set by the ops service from the"
    " database).",
    ["activity", "task_type"],
)

TASK_PENDING_FIX_OLDEST = Gauge(
    "pipeline_task_pending_fix_oldest_seconds",
    "Age of the oldest task paused as pending_fix (set by the ops service).",
    ["activity", "task_type"],
)

data_labelled(TASKS_PENDING_FIX, TASK_PENDING_FIX_OLDEST)
