"""Who may decide what, and when: the pure checks behind the update validators.

A refused update raises :class:`temporalio.exceptions.ApplicationError` with one of
the ``type`` values below, so a caller (the ops API) can map it to an HTTP status,
and the argument's field at fault as its first detail; a validator's refusal writes
nothing to the workflow history.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from temporalio.exceptions import ApplicationError

from schemas.approval_io import (
    APPROVE,
    APPROVED,
    CHANGES_REQUESTED,
    DECIDABLE,
    DECISIONS,
    ESCALATED,
    PENDING,
    REJECT,
    REJECTED,
    REQUEST_CHANGES,
    ApprovalDecision,
    ApprovalResubmission,
)

NOT_AN_APPROVAL = "NotAnApproval"  # the task is not of type approval (HTTP 404-ish)
NOT_OPEN = "ApprovalNotOpen"  # closed, or not in the state this update needs (409)
NOT_ALLOWED = "ApprovalNotAllowed"  # this person may not decide (403)
INVALID = "ApprovalInvalid"  # a bad argument (400)
REFUSALS = (NOT_AN_APPROVAL, NOT_OPEN, NOT_ALLOWED, INVALID)

STATUS_OF_DECISION = {APPROVE: APPROVED, REJECT: REJECTED, REQUEST_CHANGES: CHANGES_REQUESTED}
RESERVED_PAYLOAD_KEYS = ("trigger", "event")  # set by planning; a resubmission keeps them


def refuse(kind: str, message: str, field: str | None = None) -> ApplicationError:
    details = (field,) if field else ()
    return ApplicationError(message, *details, type=kind, non_retryable=True)


def may_decide(by: str, status: str, approvers: Sequence[str], escalate_to: Sequence[str]) -> bool:
    """Listed approvers always; the escalation contact once the SLA has passed."""
    return by in approvers or (status == ESCALATED and by in escalate_to)


def _not_open(task_id: str, status: str, wanted: str) -> ApplicationError:
    if status == PENDING:
        why = "is not waiting yet"
    elif status == CHANGES_REQUESTED:
        why = "waits for a resubmission"
    elif status in DECIDABLE:
        why = "waits for a decision"
    else:
        why = f"is closed ({status})"
    return refuse(NOT_OPEN, f"approval {task_id} {why}: cannot {wanted}")


def check_decision(
    task_id: str,
    status: str,
    approvers: Sequence[str],
    escalate_to: Sequence[str],
    d: ApprovalDecision,
) -> None:
    """Raise the refusal for ``d``, or return when it may be applied."""
    if status not in DECIDABLE:
        raise _not_open(task_id, status, "decide")
    if d.decision not in DECISIONS:
        msg = f"decision must be one of {', '.join(DECISIONS)}, got {d.decision!r}"
        raise refuse(INVALID, msg, "decision")
    if d.decision != APPROVE and not (d.reason or "").strip():
        raise refuse(INVALID, f"a reason is required to {d.decision}", "reason")
    if not may_decide(d.by, status, approvers, escalate_to):
        who = ", ".join(approvers)
        if escalate_to:
            after = "now" if status == ESCALATED else "after the SLA"
            who += f" ({', '.join(escalate_to)} {after})"
        raise refuse(NOT_ALLOWED, f"{d.by!r} may not decide {task_id}: only {who}", "by")


def check_resubmission(task_id: str, status: str, r: ApprovalResubmission) -> None:
    if status != CHANGES_REQUESTED:
        raise _not_open(task_id, status, "resubmit")
    if not r.by.strip():
        raise refuse(INVALID, "who resubmits must be named", "by")
    if not isinstance(r.payload, dict):
        raise refuse(INVALID, "payload must be a JSON object", "payload")


def resubmitted_payload(current: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """The new payload, with the reserved keys the planner set kept from the current one."""
    kept = {k: current[k] for k in RESERVED_PAYLOAD_KEYS if k in current}
    return {**{k: v for k, v in new.items() if k not in RESERVED_PAYLOAD_KEYS}, **kept}
