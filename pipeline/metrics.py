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

from prometheus_client import Counter, Gauge
from prometheus_client.metrics import MetricWrapperBase

# Values of the `layer` label of pipeline_duplicates_suppressed_total.
LAYER_LEDGER = "ledger"  # the router's or dispatcher's PostgreSQL dedupe ledger
LAYER_TEMPORAL = "temporal"  # Temporal answered WorkflowAlreadyStartedError
LAYER_IDEMPOTENCY_KEY = "idempotency_key"  # a worker task whose key was already claimed
LAYER_FLOW_WINDOW = "flow_window"  # an event already assigned to a debounce/batch window

EVENTS_CONSUMED = Counter(
    "pipeline_events_consumed_total",
    "Kafka messages consumed.",
    ["component", "topic"],
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
CONSUMER_LAG_SECONDS = Gauge(
    "pipeline_consumer_lag_seconds",
    "Age of the oldest record not committed: now minus the timestamp of the record at the"
    " committed offset, 0 when caught up (committed = partition end). Read from the fetched"
    " batches (at most one batch's span above the true age); for records not fetched yet, the"
    " time since the process saw them unfetched (a lower bound). See pipeline/lag.py.",
    ["component", "topic", "partition"],
)
DEPENDENCY_FAILING_SECONDS = Gauge(
    "pipeline_dependency_failing_seconds",
    "Seconds the oldest retry loop of this process has been failing (a start to Temporal, a"
    " ledger or flow query to PostgreSQL, a produce to Kafka, the relay's term), 0 when none"
    " fails; /readyz answers 503 while it is above 0 (pipeline/retry.py).",
)

# Labelled by values only data reveals: lag per assigned partition here; pending fixes
# per activity, permits per declared resource, flow controls per activity in their
# features' metrics modules, which add them with :func:`data_labelled` (configuration,
# never event data). Their series appear when the process first sees the value.
DATA_LABELLED: set[MetricWrapperBase] = {
    CONSUMER_LAG,
    CONSUMER_LAG_SECONDS,
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
