"""The router's flow-control metrics (docs/metrics.md, docs/flow-control.md).

Labelled by activity id (configuration, never event data: keys are unbounded, and
``ingest flow list`` shows them). An activity's series start at 0 when the router
first gates or windows one of its runs (:data:`pipeline.metrics.DATA_LABELLED`).
"""

from __future__ import annotations

from prometheus_client import Counter, Histogram

from pipeline.metrics import data_labelled

FLOW_RUNS_DELAYED = Counter(
    "pipeline_flow_runs_delayed_total",
    "Runs the router started with a delay because of their activity's throttle.",
    ["activity"],
)

FLOW_RUNS_SKIPPED = Counter(
    "pipeline_flow_runs_skipped_total",
    "Triggers skipped by their activity's flow (reason: rate_limit, singleton); counted once"
    " per trigger, not again on replay.",
    ["activity", "reason"],
)

FLOW_THROTTLE_DELAY = Histogram(
    "pipeline_flow_throttle_delay_seconds",
    "The delay a throttled run was started with (0 when a slot was free).",
    ["activity"],
    buckets=(0.01, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 4 * 3600, 86400),
)

FLOW_DEBOUNCED = Counter(
    "pipeline_flow_debounced_total",
    "Events absorbed into a debounce window (each window then runs once, with its last"
    " event); counted by the router when it first assigns the event.",
    ["activity"],
)

FLOW_WINDOW_SIGNALS = Counter(
    "pipeline_flow_window_signals_total",
    "Signal-with-starts the router sent to window workflows (one per key per flush,"
    " carrying every event collected for that key meanwhile).",
    ["activity"],
)

FLOW_RUNS_CANCELLED = Counter(
    "pipeline_flow_runs_cancelled_total",
    "Runs a cancel_on event asked Temporal to cancel (not finished when it was processed);"
    " counted once per cancelling event, not again on its redelivery or replay.",
    ["activity"],
)

data_labelled(
    FLOW_RUNS_DELAYED, FLOW_RUNS_SKIPPED, FLOW_THROTTLE_DELAY, FLOW_DEBOUNCED, FLOW_WINDOW_SIGNALS
)
data_labelled(FLOW_RUNS_CANCELLED)
