"""Approval tasks (workers/approvals): update inputs, the audit trail and the queryable state.

One frozen dataclass each, JSON-friendly (they cross the Temporal wire). Times are
ISO-8601 strings in UTC, taken from workflow time (``workflow.now()``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

APPROVAL_TASK_TYPE = "approval"

# Decisions a person may send with the ``decide`` update.
APPROVE = "approve"
REJECT = "reject"
REQUEST_CHANGES = "request_changes"
DECISIONS = (APPROVE, REJECT, REQUEST_CHANGES)

# Statuses of an approval (ApprovalState.status, approvals.status).
PENDING = "pending"  # the task has not reached its wait yet
WAITING = "waiting"  # the approvers have until the SLA deadline
ESCALATED = "escalated"  # the SLA passed: the escalation contact may decide too
CHANGES_REQUESTED = "changes_requested"  # waiting for a resubmission
APPROVED = "approved"
REJECTED = "rejected"
AUTO_REJECTED = "auto_rejected"  # the escalation SLA passed too
EXPIRED = "expired"  # no resubmission in time
# Closed without a decision, so that no row stays open after its workflow closed:
CANCELLED = "cancelled"  # the task's workflow was cancelled (e.g. its run was)
FAILED = "failed"  # the wait itself failed (the task fails with the error)
TERMINATED = "terminated"  # terminated or timed out: found closed by the sweep
DECIDABLE = (WAITING, ESCALATED)
OPEN = (PENDING, WAITING, ESCALATED, CHANGES_REQUESTED)
CLOSED = (APPROVED, REJECTED, AUTO_REJECTED, EXPIRED, CANCELLED, FAILED, TERMINATED)


@dataclass(frozen=True)
class ApprovalDecision:
    """Argument of the ``decide`` update. ``reason`` is required unless approving."""

    by: str
    decision: str  # "approve" | "reject" | "request_changes"
    reason: str | None = None


@dataclass(frozen=True)
class ApprovalResubmission:
    """Argument of the ``resubmit`` update, after ``request_changes``.

    ``payload`` replaces the task payload; the reserved ``trigger`` and ``event``
    keys are kept from the original.
    """

    by: str
    payload: dict[str, Any]
    note: str | None = None


@dataclass(frozen=True)
class ApprovalUpdateResult:
    task_id: str
    status: str  # the approval's status after the update
    seq: int  # the audit entry the update wrote (already in the database)


@dataclass(frozen=True)
class AuditEntry:
    """One line of the audit trail; ``seq`` numbers them from 0 across continue-as-new."""

    seq: int
    at: str
    # requested | reminder | escalated | decision | resubmitted | auto_rejected | expired,
    # or, closing it without a decision: cancelled | failed | terminated
    kind: str
    round: int  # 1, then +1 per resubmission
    actor: str | None = None
    decision: str | None = None
    reason: str | None = None
    waited_seconds: float | None = None  # on decisions and auto-rejections: the wait they end
    payload: dict[str, Any] | None = None  # on resubmissions: the new payload


@dataclass(frozen=True)
class ApprovalState:
    """What the ``approval`` query returns, and what continue-as-new carries."""

    task_id: str
    status: str
    round: int
    payload: dict[str, Any]
    approvers: list[str]
    escalate_to: list[str]
    waiting_since: str | None = None  # start of the current wait (request or resubmission)
    deadline: str | None = None  # of the current phase (SLA, escalation, resubmission)
    next_reminder_at: str | None = None
    reminders_sent: int = 0
    escalations: int = 0
    resubmissions: int = 0
    continued_runs: int = 0  # how many times the task continued as new
    audit: list[AuditEntry] = field(default_factory=list)


@dataclass(frozen=True)
class ApprovalNoticeInput:
    """A notice to the emit topic (``topic`` None: the worker's INGEST_EMIT_TOPIC)."""

    task_id: str
    run_id: str
    activity_id: str
    kind: str  # approval.requested | approval.reminder | approval.escalated
    body: dict[str, Any]
    topic: str | None = None


@dataclass(frozen=True)
class ApprovalHead:
    """Who and what an approval is: the fields the workflow records and the ``approvals``
    table returns alike (times differ in type: ISO strings on the wire, datetimes read)."""

    task_id: str
    run_id: str
    activity_id: str
    status: str
    round: int
    approvers: list[str]
    escalate_to: list[str]


@dataclass(frozen=True)
class RecordApprovalInput(ApprovalHead):
    """New audit entries plus the approval's summary row as of the last of them."""

    deadline: str | None
    payload: dict[str, Any]
    requested_at: str
    entries: list[AuditEntry]
