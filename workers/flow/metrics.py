"""The worker's flow-control metrics (docs/metrics.md, docs/flow-control.md).

Concurrency slots: runs of an activity with ``flow.concurrency`` hold a slot per key
value. Labelled by activity only (keys are event data, unbounded): ``ingest flow
list`` shows each key. The gauges come from PostgreSQL, the same in every worker:
aggregate with ``max``, never ``sum``. Batches: the size of each batch run started.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

from pipeline.metrics import data_labelled

FLOW_WAIT = Histogram(
    "pipeline_flow_wait_seconds",
    "Time a run of a concurrency-limited activity waited for its slot (first round to holding it).",
    ["activity"],
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600),
)

FLOW_SLOTS_IN_USE = Gauge(
    "pipeline_flow_slots_in_use",
    "Concurrency slots held by runs, summed over the activity's keys (from permit_slots).",
    ["activity"],
)

FLOW_RUNS_WAITING = Gauge(
    "pipeline_flow_runs_waiting",
    "Runs waiting for a concurrency slot, summed over the activity's keys (flow_waiters).",
    ["activity"],
)

FLOW_OLDEST_WAIT = Gauge(
    "pipeline_flow_oldest_wait_seconds",
    "How long the activity's longest-waiting run has waited for its slot so far (0: none).",
    ["activity"],
)

FLOW_BATCH_SIZE = Histogram(
    "pipeline_flow_batch_size",
    "Events per batch run, observed by the worker once per batch it started.",
    ["activity"],
    buckets=(1, 2, 5, 10, 20, 50, 100, 200, 500, 1000),
)

data_labelled(FLOW_WAIT, FLOW_SLOTS_IN_USE, FLOW_RUNS_WAITING, FLOW_OLDEST_WAIT, FLOW_BATCH_SIZE)

FLOW_RUNS_ENDED = Counter(
    "pipeline_flow_runs_ended_total",
    "Runs that ended without running to their end (workers/lifecycle.py), by cause:"
    " 'cancel_on' (a cancelling event), 'timeout_start' or 'timeout_finish'"
    " (flow.timeouts), 'singleton' (a singleton's mode: cancel), 'cancelled' (any other"
    " cancellation). Counted by the step that"
    " ends the run, once per run.",
    ["activity", "cause"],
)
# The values of FLOW_RUNS_ENDED's cause label (never event data: no event id).
CAUSES = ("cancel_on", "timeout_start", "timeout_finish", "singleton", "cancelled")


def ended_cause(ended_by: str | None) -> str:
    """The ``cause`` label of a run's ``ended_by`` (``cancel_on:<event id>`` ->
    ``cancel_on``, ``timeout:start`` -> ``timeout_start``, ``singleton:<workflow id>``
    -> ``singleton``): one of :data:`CAUSES`."""
    if ended_by is None:
        return "cancelled"
    for cause in CAUSES:
        if ended_by.replace(":", "_").startswith(cause):
            return cause
    return "cancelled"


data_labelled(FLOW_RUNS_ENDED)

# flow.ordered (workers/flow/order*.py): runs that wait for their turn in their key's line.
FLOW_ORDER_WAIT = Histogram(
    "pipeline_flow_order_wait_seconds",
    "Time a run of an ordered activity waited for its turn (its place given to its turn),"
    " observed once per run that had to wait.",
    ["activity"],
    buckets=(0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600),
)
FLOW_ORDER_WAITING = Gauge(
    "pipeline_flow_order_runs_waiting",
    "Runs of an ordered activity that have a place behind another open one, summed over"
    " its lines (from flow_order_places).",
    ["activity"],
)
FLOW_ORDER_BLOCKED = Gauge(
    "pipeline_flow_order_blocked_lines",
    "Lines of an ordered activity whose head run failed: they wait for ingest flow release.",
    ["activity"],
)
FLOW_ORDER_OLDEST_BLOCKED = Gauge(
    "pipeline_flow_order_oldest_blocked_seconds",
    "How long the activity's longest-blocked line has been blocked by a failed head (0: none).",
    ["activity"],
)

data_labelled(FLOW_ORDER_WAIT, FLOW_ORDER_WAITING, FLOW_ORDER_BLOCKED, FLOW_ORDER_OLDEST_BLOCKED)
