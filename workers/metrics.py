"""The worker's metrics of runs and tasks (docs/metrics.md); permits, approvals and flow
control declare theirs in their own folders.
"""

from __future__ import annotations

from prometheus_client import Counter

# Values of the `result` label of pipeline_runs_logged_total.
RUN_INSERTED = "inserted"
RUN_EXISTING = "existing"

RUNS_LOGGED = Counter(
    "pipeline_runs_logged_total",
    "activity_runs inserts, 'existing' when the row was already there.",
    ["result"],
)

TASK_INSTANCES = Counter(
    "pipeline_task_instances_total",
    "Task instances reaching a state.",
    ["task_type", "status"],
)

TASK_FIXES = Counter(
    "pipeline_task_fixes_total",
    "Operator actions on paused tasks (fix, skip, abort), counted by the worker once each.",
    ["action"],
)
