"""The router's own metrics (docs/metrics.md); what it shares with other processes is in
:mod:`pipeline.metrics`, its flow control's in :mod:`router.flow.metrics`.
"""

from __future__ import annotations

from prometheus_client import Counter, Histogram

START_LATENCY = Histogram(
    "pipeline_start_latency_seconds",
    "Time from a message's Kafka timestamp to Temporal acknowledging its start.",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
)

# Unlabelled: an event's type is event data, and a `type` label taken from it made one
# series per distinct type (issue 34). No `component` label either: only the router's
# planner counts it, and replays count as the router (router.routing.build_routing).
# Being unlabelled, it exists at 0 in every process from start (DESIGN convention 11).
EVENTS_UNMATCHED = Counter(
    "pipeline_events_unmatched_total",
    "Events no enabled activity subscribes to (no label: the event type is event data).",
)
