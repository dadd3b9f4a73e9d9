"""Approval metrics (docs/approvals.md). Workflow code cannot count deterministically, so
the record_approval local activity counts each audit entry once (when its row is first
written), and every worker sets the gauge from PostgreSQL.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

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
