"""Every Prometheus metric the pipeline exports, defined once.

The README documents each one; deploy/ dashboards and alert rules use these
names, and a test checks that they are all exported.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

EVENTS_CONSUMED = Counter(
    "pipeline_events_consumed_total",
    "Kafka messages consumed.",
    ["component", "topic"],
)
EVENTS_STAMPED = Counter(
    "pipeline_events_stamped_total",
    "Events given an event_id by ingress, by strategy ('existing' when one was kept).",
    ["strategy"],
)
WORKFLOWS_STARTED = Counter(
    "pipeline_workflows_started_total",
    "RunActivityWorkflow executions freshly started.",
    ["trigger"],
)
DUPLICATES_SUPPRESSED = Counter(
    "pipeline_duplicates_suppressed_total",
    "Starts not made because the run already existed (ledger, Temporal), and tasks not run"
    " because their idempotency key was already claimed (worker).",
    ["component", "trigger", "layer"],
)
DLQ_MESSAGES = Counter(
    "pipeline_dlq_messages_total",
    "Messages sent to the dead-letter topic, by reason.",
    ["component", "reason"],
)
START_LATENCY = Histogram(
    "pipeline_start_latency_seconds",
    "Time from a message's Kafka timestamp to Temporal acknowledging its start.",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
)
START_ERRORS = Counter(
    "pipeline_start_errors_total",
    "Retriable failures while starting workflows (each retry counts).",
    ["component", "error"],
)
CONSUMER_LAG = Gauge(
    "pipeline_consumer_lag",
    "Messages between the committed offset and the partition end.",
    ["component", "topic", "partition"],
)
EVENTS_UNMATCHED = Counter(
    "pipeline_events_unmatched_total",
    "Events no enabled activity subscribes to.",
    ["type"],
)
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
MISFIRES = Counter(
    "pipeline_misfires_total",
    "Scheduled nominal times that fired late or not at all, by misfire policy.",
    ["policy"],
)
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
TASK_FIXES = Counter(
    "pipeline_task_fixes_total",
    "Operator actions on paused tasks (fix, skip, abort), counted by the worker once each.",
    ["action"],
)

# Permits (workers/permits). Workflow code cannot count deterministically, so the
# permit local activities count (once per acquire/round/end, when they write the
# row), and the worker's refresher sets the gauges from PostgreSQL.
PERMITS_HELD = Gauge(
    "pipeline_permits_held",
    "Permits currently held per resource (from permit_slots; the same in every worker).",
    ["resource"],
)
PERMIT_CAPACITY = Gauge(
    "pipeline_permit_capacity",
    "Declared capacity per resource (permit_resources).",
    ["resource"],
)
PERMIT_WAIT = Histogram(
    "pipeline_permit_wait_seconds",
    "Time from a task's first acquire attempt to holding a permit.",
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600),
)
PERMIT_CONFLICTS = Counter(
    "pipeline_permit_acquire_conflicts_total",
    "Acquire attempts that found the slot busy (WorkflowAlreadyStartedError).",
    ["resource"],
)
PERMIT_LEASE_EXPIRED = Counter(
    "pipeline_permit_lease_expired_total",
    "Permits that ended because their lease ran out, not by release.",
    ["resource"],
)

# Approvals (workers/approvals). Workflow code cannot count deterministically, so the
# record_approval local activity counts each audit entry once (when its row is
# first written), and every worker sets the gauge from PostgreSQL.
APPROVALS_WAITING = Gauge(
    "pipeline_approvals_waiting",
    "Approval tasks waiting for a decision (waiting or escalated; from the approvals table,"
    " the same in every worker).",
)
APPROVAL_DECISIONS = Counter(
    "pipeline_approval_decisions_total",
    "Approval outcomes: approve, reject, request_changes (people), auto_reject (escalation"
    " SLA passed), resubmission_timeout (no resubmission in time).",
    ["outcome"],
)
SLA_ESCALATIONS = Counter(
    "pipeline_sla_escalations_total",
    "Approvals escalated because their SLA passed without a decision.",
)
APPROVAL_WAIT = Histogram(
    "pipeline_approval_wait_seconds",
    "Time from an approval request (or resubmission) to the decision or auto-rejection.",
    buckets=(1, 10, 60, 300, 900, 3600, 4 * 3600, 12 * 3600, 86400, 3 * 86400, 7 * 86400),
)
