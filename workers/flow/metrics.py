"""The worker's flow-control metrics (docs/metrics.md, docs/flow-control.md).

Concurrency slots: runs of an activity with ``flow.concurrency`` hold a slot per key
value. Labelled by activity only (keys are event data, unbounded): ``ingest flow
list`` shows each key. The gauges come from PostgreSQL, the same in every worker:
aggregate with ``max``, never ``sum``. Batches: the size of each batch run started.
"""

from __future__ import annotations

from prometheus_client import Gauge, Histogram

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
