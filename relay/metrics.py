"""The outbox relay's metrics (docs/metrics.md). Unlabelled: each exists at 0 from
process start.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge

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
