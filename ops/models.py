"""The ops API's response bodies, as models: the OpenAPI schema (``/openapi.json``,
``/docs``) names every field of every answer, errors included.

Times are ISO-8601 strings (UTC) as the rows give them; ``payload`` and ``patch`` are the
task's own JSON. Every error is :class:`ErrorBody` (``ops.errors``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from schemas.approval_io import ApprovalState
from workers.approvals.store import ApprovalRow


class ErrorBody(BaseModel):
    """Every error: 400 names the bad ``field``, 403 a decider who may not decide (``by``)."""

    detail: str
    field: str | None = None


class AuthInfo(BaseModel):
    """How to sign in (unauthenticated: the console asks it first)."""

    token_required: bool = Field(
        description="false: an authenticating proxy names you (INGEST_OPS_IDENTITY_HEADER), "
        "so the console tries without a token first"
    )


class WhoAmI(BaseModel):
    """Who the request's credentials name: what the audit rows record for its actions."""

    name: str
    kind: Literal["shared-token", "person-token", "proxy"] = Field(
        description="shared-token: INGEST_OPS_TOKEN; person-token: a line of "
        "INGEST_OPS_TOKENS_FILE; proxy: INGEST_OPS_IDENTITY_HEADER from a trusted proxy"
    )
    person: bool = Field(description="false for the shared token: it cannot decide approvals")


class Run(BaseModel):
    run_id: str
    activity_id: str
    activity_name: str | None
    workflow_id: str
    trigger_kind: Literal["event", "cron"]
    event_id: str | None
    scheduled_for: str | None
    status: str = Field(
        description="running | held | succeeded | failed | cancelled | timed_out | skipped"
    )
    ended_by: str | None = Field(
        None,
        description="what ended a cancelled, timed-out or skipped run: cancel_on:<event id>,"
        " singleton:<workflow id of the run that replaced it>, timeout:start, timeout:finish,"
        " held:skipped (null: its tasks ended it, or a cancellation that named nothing)",
    )
    started_at: str
    finished_at: str | None
    trace_id: str | None = Field(
        None, description="the run's W3C trace id, 32 hex digits (null: not traced)"
    )
    trace_url: str | None = Field(
        None, description="its trace in the tracing UI (INGEST_OPS_TRACE_URL_TEMPLATE)"
    )


class ListedRun(Run):
    task_counts: dict[str, int] | None = Field(description="tasks by status (null: none yet)")


class RunList(BaseModel):
    runs: list[ListedRun]


class Task(BaseModel):
    task_id: str
    run_id: str
    activity_id: str
    run_workflow_id: str
    task_type: str
    index: int
    status: str
    attempts: int
    last_error: str | None
    payload: dict[str, Any]
    duplicate_of: str | None
    created_at: str
    updated_at: str


class Fix(BaseModel):
    """An operator action on a paused task (``task_fixes``)."""

    task_id: str
    seq: int
    run_id: str
    task_type: str
    action: Literal["fix", "skip", "abort"]
    patch: dict[str, Any] | None
    error: str
    actor: str
    note: str | None
    created_at: str


class RunDetail(BaseModel):
    run: Run
    temporal_status: str | None = Field(description="RUNNING, COMPLETED, ... (null: unknown)")
    tasks: list[Task]
    fixes: list[Fix]


class TaskList(BaseModel):
    tasks: list[Task]


class TaskDetail(BaseModel):
    task: Task
    fixes: list[Fix]


class ActionResult(BaseModel):
    task_id: str
    action: Literal["fix", "skip", "abort"]
    seq: int = Field(description="the task_fixes row the action wrote")


class DlqHeader(BaseModel):
    """One Kafka header of a DLQ message: its name and size; its value only on demand
    (``GET /api/dlq/{partition}/{offset}``)."""

    name: str = Field(description="the name (its first 128 bytes)")
    name_truncated: bool | None = Field(None, description="true when the name is longer")
    bytes: int = Field(description="the value's size in bytes")
    # On demand only (left out in a peek):
    truncated: bool | None = Field(None, description="the value shown is its first 4,096 bytes")
    value: str | None = Field(None, description="the value as UTF-8 text (null: no value)")
    value_base64: str | None = Field(None, description="a value that is not UTF-8")


class DlqMessage(BaseModel):
    partition: int
    offset: int
    timestamp_ms: int | None
    # The dlq_* headers' values, truncated (128, 1,024, 64 and 32 bytes):
    reason: str | None
    detail: str | None
    component: str | None
    attempt: str | None
    key: str | None = Field(description="the key's first 256 bytes as text")
    key_bytes: int | None = Field(description="the key's size (null: no key)")
    key_truncated: bool
    value_bytes: int
    truncated: bool = Field(description="the value shown is its first 4,096 bytes")
    header_count: int
    header_bytes: int = Field(description="bytes of every header name and value")
    headers: list[DlqHeader] = Field(
        description="in a peek: the first 16 headers' names and sizes, no values; one "
        "message (GET /api/dlq/{partition}/{offset}): every header with its value, as many "
        "as fit in INGEST_OPS_DLQ_PEEK_MAX_BYTES"
    )
    # One of the two (the other is left out):
    value: str | None = Field(None, description="the value as UTF-8 text")
    value_base64: str | None = Field(None, description="a value that is not UTF-8")


class DlqRecord(DlqMessage):
    """One DLQ message with its header values."""

    stopped_early: bool = Field(description="true when headers were left out for the budget")
    not_shown: int = Field(description="headers left out because of the byte budget")


class UndecodablePartition(BaseModel):
    partition: int | None = Field(description="null when the client did not say which")
    offset: int | None
    cause: str


class DlqPeek(BaseModel):
    topic: str
    scanned: int = Field(description="messages read")
    by_reason: dict[str, int] = Field(
        description="messages read, by reason (the 50 most frequent; the rest as '(other)')"
    )
    max_bytes: int = Field(description="the answer's byte budget (INGEST_OPS_DLQ_PEEK_MAX_BYTES)")
    read_bytes: int = Field(
        description="record bytes read from Kafka (INGEST_OPS_DLQ_PEEK_READ_MAX_BYTES bounds it)"
    )
    stopped_early: bool = Field(
        description="true when a byte budget stopped the peek before it read or showed every "
        "message asked for (see not_read, not_shown)"
    )
    not_read: int = Field(description="messages of the asked window left unread (read budget)")
    not_shown: int = Field(description="matching messages read but left out (answer budget)")
    messages: list[DlqMessage] = Field(description="newest first")
    # Partitions whose record batch could not be decoded here (left out when none).
    undecodable: list[UndecodablePartition] | None = None


class ReplayReport(BaseModel):
    """The ``ingest replay --json`` report."""

    topic: str
    dry_run: bool
    ledger: bool
    complete: bool
    elapsed_seconds: float
    rate_per_second: float
    read: int
    already_routed_ledger: int
    already_started_temporal: int
    started: int
    would_start: int
    skipped: int = Field(description="triggers skipped by the activity's rate_limit or singleton")
    windowed: int = Field(description="events put into a debounce window or a batch")
    dlq: int
    unmatched: int
    partitions: dict[str, list[int]] = Field(description="partition: [first, stop) offsets")
    # A DLQ re-drive only (left out otherwise):
    dlq_read: int | None = None
    to_events: int | None = None
    returned_to_dlq: int | None = None
    carried_forward: int | None = None


class Permit(BaseModel):
    resource: str
    slot: str
    capacity: int
    state: str = Field(description="held | released | lease_expired | <status> (not released)")
    holder: str
    token: int = Field(description="the fencing token (monotonic per slot)")
    permit_run_id: str
    acquired_at: str
    age_seconds: float
    lease_seconds: int


class PermitList(BaseModel):
    permits: list[Permit]


class FlowKey(BaseModel):
    """One (activity, key) with flow state (router/flow/listing.py; None: no data)."""

    activity_id: str
    activity: str
    key: str = Field(description="the key value; '' when the control has no key")
    slots_in_use: int | None = None
    waiting: int | None = None
    next_throttle_slot: float | None = Field(
        None, description="seconds until a start arriving now would go (0: at once)"
    )
    rate_limit_free: int | None = Field(None, description="triggers that would pass now")
    windows: int | None = None
    skips_last_hour: int | None = None
    singleton_holder: str | None = None
    cancelled_last_hour: int | None = Field(
        None, description="runs ended cancelled in the last hour (cancel_on, singleton cancel)"
    )
    timed_out_last_hour: int | None = Field(
        None, description="runs ended timed_out in the last hour (flow.timeouts)"
    )


class FlowSkip(BaseModel):
    workflow_id: str
    activity_id: str
    key: str
    reason: str = Field(description="rate_limit | singleton")
    event_id: str | None
    at: datetime


class FlowState(BaseModel):
    keys: list[FlowKey]
    skips: list[FlowSkip] = Field(description="the latest skipped triggers, newest first")


class ApprovalList(BaseModel):
    approvals: list[ApprovalRow]  # the ``approvals`` table's row


class ApprovalDetail(BaseModel):
    approval: ApprovalState


class UpdateResult(BaseModel):
    """A decision or resubmission, answered once its audit entry is written."""

    task_id: str
    status: str = Field(description="the approval's status after it")
    seq: int = Field(description="the audit entry it wrote")


_WHY = {
    400: "a bad argument: `field` names it",
    401: "no bearer token",
    403: "a wrong token (or, on a decision, a person who may not decide: `field` is `by`)",
    404: "an unknown id",
    409: "the state forbids it",
    500: "an unexpected error (the ops service logs it)",
    503: "Temporal, or a worker it waits for, did not answer in time",
}


def errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    """``responses=`` for these error codes, each an :class:`ErrorBody`."""
    return {code: {"model": ErrorBody, "description": _WHY[code]} for code in codes}
