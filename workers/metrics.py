"""The worker's metrics of runs and tasks (docs/metrics.md); permits, approvals and flow
control declare theirs in their own folders.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge

from pipeline.metrics import data_labelled

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

# Pausing an activity (ingest activities pause, workers/hold.py). Labelled by activity
# id (configuration, never event data). The gauges come from PostgreSQL, the same in
# every worker: aggregate with ``max``, never ``sum``.
RUNS_HELD = Counter(
    "pipeline_runs_held_total",
    "Runs recorded 'held' because their activity was paused when they started.",
    ["activity"],
)

RUNS_HELD_NOW = Gauge(
    "pipeline_activity_held_runs",
    "Runs held now (activity_runs.status = 'held'): waiting for their activity's resume.",
    ["activity"],
)

ACTIVITY_PAUSED = Gauge(
    "pipeline_activity_paused",
    "1 while the activity is paused (activities.paused_at set), else 0.",
    ["activity"],
)

RUNS_RELEASED = Counter(
    "pipeline_runs_released_total",
    "Held runs leaving the hold, by outcome: resumed (went on to their tasks) or skipped.",
    ["activity", "outcome"],
)

data_labelled(RUNS_HELD, RUNS_HELD_NOW, ACTIVITY_PAUSED, RUNS_RELEASED)
