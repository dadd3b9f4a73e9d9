"""Permit metrics (docs/permits.md), labelled by the declared resource. Workflow code
cannot count deterministically, so the permit local activities count, and every worker
sets the gauges from PostgreSQL: aggregate with ``max by (resource)``, never ``sum``.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

from pipeline.metrics import data_labelled

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

data_labelled(PERMITS_HELD, PERMIT_CAPACITY, PERMIT_CONFLICTS, PERMIT_LEASE_EXPIRED)
