"""The cron dispatcher's metrics (docs/metrics.md)."""

from __future__ import annotations

from prometheus_client import Counter

MISFIRES = Counter(
    "pipeline_misfires_total",
    "Scheduled nominal times that fired late or not at all, by misfire policy.",
    ["policy"],
)
