"""Ingress's own metrics (docs/metrics.md)."""

from __future__ import annotations

from prometheus_client import Counter

EVENTS_STAMPED = Counter(
    "pipeline_events_stamped_total",
    "Events given an event_id by ingress, by strategy ('existing' when one was kept).",
    ["strategy"],
)
