"""The Prometheus metrics every process shares, and the helpers every feature uses.

A feature with metrics of its own declares them beside its code, in a ``metrics.py``
of its folder (flow control: ``router/flow/metrics.py``, ``workers/flow/metrics.py``),
with these helpers. docs/metrics.md documents each one; deploy/ dashboards and alert
rules use these names, and tests check that every metric module's metrics are
exported, initialised and bounded.

Every labelled series a process knows it may count starts at 0 when the process
starts (:func:`start_at_zero`), following the Prometheus instrumentation guidance
("avoid missing metrics"): Prometheus takes a series' first sample as its
starting point, so a counter that first appears at 1 after a restart has
``increase() == 0`` and an alert on the first dead letter never fires. Each
process does it in one place, from the label values its code declares:
``ingress.service.start_metrics_at_zero``, ``router.service.start_metrics_at_zero``,
and for the worker each part's factory (``workers.activities``,
``scheduler.dispatcher``, ``workers.approvals.activities``; permits per resource
when the gauges are first refreshed). The metrics in :data:`DATA_LABELLED` are
labelled by data (partitions, activities, permit resources) and cannot have a
series before that data is seen.

No label value comes from event data (DESIGN convention 14): every label's values are
code constants or configuration (topics, partitions, activities, handlers, permit
resources). ``tests/unit/pipeline/test_metric_labels.py`` reads every label name here and
every ``.labels(...)`` argument in the source tree.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from types import ModuleType

from prometheus_client import Counter, Gauge, Histogram
from prometheus_client.metrics import MetricWrapperBase

# Values of the `layer` label of pipeline_duplicates_suppressed_total.
LAYER_LEDGER = "ledger"  # the router's or dispatcher's PostgreSQL dedupe ledger
LAYER_TEMPORAL = "temporal"  # Temporal answered WorkflowAlreadyStartedError
LAYER_IDEMPOTENCY_KEY = "idempotency_key"  # a worker task whose key was already claimed
LAYER_FLOW_WINDOW = "flow_window"  # an event already assigned to a debounce/batch window
# Values of the `result` label of pipeline_runs_logged_total.
RUN_INSERTED = "inserted"
RUN_EXISTING = "existing"

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
# Unlabelled: an event's type is event data, and a `type` label taken from it made one
# series per distinct type (issue 34). No `component` label either: only the router's
# planner counts it, and replays count as the router (router.routing.build_routing).
# Being unlabelled, it exists at 0 in every process from start (DESIGN convention 11).
EVENTS_UNMATCHED = Counter(
    "pipeline_events_unmatched_total",
    "Events no enabled activity subscribes to (no label: the event type is event data).",
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

# flow.concurrency hold a permit slot per key value. Labelled by activity only (keys
# are event data, unbounded): `ingest flow list` shows each key. The gauges come from
# PostgreSQL (the same in every worker: aggregate with max, never sum).

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

# The outbox relay (relay/). Unlabelled: each exists at 0 from process start.
OUTBOX_DEPTH = Gauge(
    "pipeline_outbox_depth",
    "Outbox rows not yet published by the relay (reported by the owner and by standbys).",
)
RELAY_LAG = Gauge(
    "pipeline_relay_lag_seconds",
    "Age of the oldest outbox row not yet published (0 when the outbox is drained).",
)
OUTBOX_PUBLISHED = Counter(
    "pipeline_outbox_published_total",
    "Outbox rows published in committed relay transactions (rate() = published per second).",
)
RELAY_ABORTED = Counter(
    "pipeline_relay_transactions_aborted_total",
    "Relay Kafka transactions aborted (their rows are published again by the next one).",
)

# Labelled by values only data reveals: lag per assigned partition, pending fixes per
# activity, permits per declared resource, flow controls per activity (configuration,
# never event data). Their series appear when the process first sees the value (permits
# and flow concurrency: at the first gauge refresh). A feature's own metrics module adds
# its own with :func:`data_labelled`.
DATA_LABELLED: set[MetricWrapperBase] = {
    CONSUMER_LAG,
    TASKS_PENDING_FIX,
    TASK_PENDING_FIX_OLDEST,
    PERMITS_HELD,
    PERMIT_CAPACITY,
    PERMIT_CONFLICTS,
    PERMIT_LEASE_EXPIRED,
}


def data_labelled(*metrics: MetricWrapperBase) -> None:
    """Declare ``metrics`` as labelled by data (see :data:`DATA_LABELLED`)."""
    DATA_LABELLED.update(metrics)


def start_at_zero(metric: MetricWrapperBase, **values: Iterable[str]) -> None:
    """Create ``metric``'s series for every combination of ``values`` (one collection of
    values per label name; every label must be named), each at 0 until first counted.

    Idempotent: a series that exists keeps its value.
    """
    names = list(values)
    for combo in itertools.product(*(sorted(set(values[n])) for n in names)):
        metric.labels(**dict(zip(names, combo, strict=True)))


def declared(module: ModuleType, prefix: str) -> frozenset[str]:
    """The string constants ``module`` declares as ``{prefix}*``: e.g. every DLQ reason
    of ``schemas.envelope`` (``R_*``), so a reason added there starts at 0 without a
    second list to keep in step."""
    return frozenset(
        v for k, v in vars(module).items() if k.startswith(prefix) and isinstance(v, str)
    )
