"""Inputs and outputs of every workflow and activity: one frozen dataclass each.

They cross the Temporal wire as JSON (temporalio's default converter), so they
only hold JSON-friendly types. Times are ISO-8601 strings in UTC.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from schemas import ids
from schemas.approval_io import ApprovalState

TRIGGER_EVENT = "event"
TRIGGER_CRON = "cron"

# The Temporal type name of the run workflow: the worker registers it under this
# name and every starter (router, replay, cron dispatcher) starts it by it.
RUN_ACTIVITY_WORKFLOW = "RunActivityWorkflow"
# The signal that wakes a run held while its activity is paused (workers/hold.py):
# ``ingest activities resume`` sends it, after clearing the pause; it carries nothing.
ACTIVITY_RESUMED_SIGNAL = "activity_resumed"

WINDOW_DEBOUNCE = "debounce"
WINDOW_BATCH = "batch"


@dataclass(frozen=True)
class WindowInfo:
    """What a debounced or batched run's window held (``RunActivityInput.window``)."""

    kind: str  # "debounce" | "batch"
    key: str  # the flow key's value ("" when the control has no key)
    size: int  # events in the window
    first_event_id: str
    last_event_id: str
    # "full" (a batch reached max_size), "timeout" (a batch's timeout after its first
    # event), "quiet" (a debounce period without a new event), "max_wait" (a debounce
    # window held for max_wait)
    closed_by: str


@dataclass(frozen=True)
class RunActivityInput:
    activity_id: str
    workflow_id: str
    run_id: str
    trigger_kind: str  # "event" | "cron"
    event_id: str | None = None
    event: dict[str, Any] | None = None  # envelope: type, source, time, subject, data
    scheduled_for: str | None = None
    context_window_start: str | None = None
    context_window_end: str | None = None
    # Set only on a debounced or batched run (optional, so histories recorded before
    # them replay unchanged). A debounce run's ``event`` is the window's last event;
    # a batch run has no single event: ``events`` holds all of them, in arrival order.
    window: WindowInfo | None = None
    events: list[dict[str, Any]] | None = None

    @classmethod
    def for_event(cls, activity_id: str, event_id: str, event: dict[str, Any]) -> RunActivityInput:
        """The run of ``activity_id`` triggered by one event (contract id and run id)."""
        wid = ids.event_workflow_id(activity_id, event_id)
        return cls(
            activity_id=activity_id,
            workflow_id=wid,
            run_id=str(ids.run_id_for(wid)),
            trigger_kind=TRIGGER_EVENT,
            event_id=event_id,
            event=event,
        )

    @classmethod
    def for_window(
        cls,
        activity_id: str,
        kind: str,
        key: str,
        members: list[tuple[str, dict[str, Any]]],
        closed_by: str,
    ) -> RunActivityInput:
        """The run of one closed window; ``members``: (event id, envelope), in the order
        the window recorded them. The id comes from the members (schemas.ids)."""
        if not members:
            raise ValueError("a window run needs at least one event")
        first, last = members[0][0], members[-1][0]
        if kind == WINDOW_DEBOUNCE:
            wid = ids.debounce_workflow_id(activity_id, first, last)
        elif kind == WINDOW_BATCH:
            wid = ids.batch_workflow_id(activity_id, [m[0] for m in members])
        else:
            raise ValueError(f"window kind must be debounce or batch, got {kind!r}")
        debounce = kind == WINDOW_DEBOUNCE
        return cls(
            activity_id=activity_id,
            workflow_id=wid,
            run_id=str(ids.run_id_for(wid)),
            trigger_kind=TRIGGER_EVENT,
            event_id=last if debounce else None,
            event=members[-1][1] if debounce else None,
            window=WindowInfo(kind, key, len(members), first, last, closed_by),
            events=None if debounce else [m[1] for m in members],
        )

    @classmethod
    def for_cron(
        cls, activity_id: str, window_start: datetime, window_end: datetime
    ) -> RunActivityInput:
        """The cron run of nominal time ``window_end``, covering ``(window_start, window_end]``."""
        wid = ids.cron_workflow_id(activity_id, window_end)
        return cls(
            activity_id=activity_id,
            workflow_id=wid,
            run_id=str(ids.run_id_for(wid)),
            trigger_kind=TRIGGER_CRON,
            scheduled_for=window_end.isoformat(),
            context_window_start=window_start.isoformat(),
            context_window_end=window_end.isoformat(),
        )


@dataclass(frozen=True)
class RunActivityResult:
    run_id: str
    status: str  # "succeeded" | "failed"
    tasks_total: int
    tasks_succeeded: int
    tasks_failed: int
    tasks_duplicate: int
    # Skipped by an operator while pending_fix (the run goes on), or not run because an
    # approval before them was not given (the approval failed, so the run fails).
    tasks_skipped: int = 0


@dataclass(frozen=True)
class LogRunInput:
    run: RunActivityInput


@dataclass(frozen=True)
class LogRunResult:
    inserted: bool


@dataclass(frozen=True)
class FinishRunInput:
    run_id: str
    status: str
    # Set when the run holds a flow slot: the finish step also releases it and answers
    # which waiting runs to wake (one step for both; absent from older histories).
    release: FlowReleaseInput | None = None
    # Set when the run has a place in a flow.ordered line: a run that ends succeeded,
    # cancelled, timed out or skipped closes it, and the answer names the next run.
    in_line: bool = False


@dataclass(frozen=True)
class PermitRequest:
    """A task's ``permit``: the resource, and its own lease (None: the resource's)."""

    resource: str
    lease_seconds: int | None = None


@dataclass(frozen=True)
class TaskSpec:
    """One planned task: what ``plan_tasks`` returns and a child workflow runs."""

    task_type: str
    index: int
    payload: dict[str, Any] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)
    idempotency_key: str | None = None
    on_failure: str = "fail"  # "fail" | "pause" (see schemas.definitions.TaskDef)
    permit: PermitRequest | None = None
    # Run the handler as a local activity: set by the plan when the handler declares
    # itself short (workers.handlers.base.register). Recorded with the plan, so a
    # replay takes the same path whatever the worker's registry says now.
    local: bool = False

    def key_only(self) -> TaskSpec:
        """The spec without its content (payload, config, ...): what a task state
        change needs (its type and index), so the payload is not sent again."""
        return TaskSpec(self.task_type, self.index)


@dataclass(frozen=True)
class PlanTasksInput:
    run: RunActivityInput


@dataclass(frozen=True)
class FlowSlot:
    """The concurrency slot a run holds while its tasks execute (``flow.concurrency``).

    Formed by ``start_run`` from the definition and the run's event, and recorded with
    the plan, so a replay waits on the same resource with the same priority whatever
    the definition says later.
    """

    resource: str  # schemas.ids.flow_resource(activity_id, key)
    activity_id: str
    key: str | None  # the key's value in the event (None: one limit for the activity)
    limit: int
    priority: int = 3  # 1 (first) .. 5 (last): the order waiting runs are admitted in


@dataclass(frozen=True)
class FlowReleaseInput:
    slot: FlowSlot
    holder: str


@dataclass(frozen=True)
class RunTimeouts:
    """``flow.timeouts`` of a run, in seconds (workers/lifecycle.py)."""

    start: float | None = None
    finish: float | None = None


@dataclass(frozen=True)
class OrderPlace:
    """A run's place in its flow.ordered line (router/flow/order.py), as ``start_run``
    found it: ``turn`` when no place before it in the line was open then."""

    activity_id: str
    key: str  # the line's key value ('' : the activity is one line)
    seq: int
    turn: bool


@dataclass(frozen=True)
class PlanTasksResult:
    tasks: list[TaskSpec]
    # Set when the activity has flow.concurrency: the run holds a slot around its tasks.
    # Absent from histories recorded before it, which therefore hold none.
    flow_slot: FlowSlot | None = None
    # The slot itself when start_run's first admission round granted it (the limit not
    # reached): the run holds it with no flow_acquire step. None: it asks flow_acquire.
    flow_grant: PermitGrant | None = None
    # flow.ordered: the run's place in its key's line (workers/flow/order.py). None (and
    # in older histories): not in a line, the run starts its tasks at once.
    flow_order: OrderPlace | None = None
    # Its activity was paused when start_run recorded the run: the row says 'held', no
    # slot round was made, and the run waits in workers/hold.py before its first task.
    held: bool = False
    # flow.timeouts as start_run read them (workers/lifecycle.py): a replay keeps them
    # whatever the definition says later. None (and in older histories): no timeout.
    timeouts: RunTimeouts | None = None


@dataclass(frozen=True)
class TaskCarry:
    """What a task that loops carries into its next run when it continues as new.

    Each loop adds its own field (approvals: the approval state with its audit trail;
    pause-and-fix: the fixes so far, while the input's payload is the patched one).
    """

    continued_runs: int = 1  # how many times the task has continued as new, this one included
    approval: ApprovalState | None = None
    fixes: list[FixEntry] | None = None


@dataclass(frozen=True)
class TaskInstanceInput:
    task_id: str  # task-{run_id}:{task_type}:{index}
    run_id: str
    activity_id: str
    spec: TaskSpec
    # Set only on a run continued as new (workers/continuation.py): the first run
    # already claimed the task and marked it running, so the next ones must not.
    continued: TaskCarry | None = None
    # Claim and mark running in one step. Parents set it; children started before
    # it existed replay their recorded two steps (no patch marker needed).
    claim_running: bool = False
    # The handler step of a local task without a permit may claim it first, then run
    # the handler and mark it succeeded (``run_local_task``: one step for the three).
    # Parents set it; children started before it existed replay their recorded steps.
    claim_in_step: bool = False
    # The size of the run's plan: the step that marks the run's last task succeeded
    # then marks the run succeeded too (workers/store.py, ``_advance``). None (children
    # started before it existed): the task is only counted; the parent finishes the run.
    run_tasks: int | None = None


@dataclass(frozen=True)
class TaskInstanceResult:
    task_id: str
    status: str  # "succeeded" | "failed" | "duplicate" | "skipped"
    error: str | None = None
    # This task's last step also marked the run succeeded (its last task to succeed):
    # the parent then has no finish step to run. False in results recorded before it.
    run_finished: bool = False


@dataclass(frozen=True)
class TaskStateInput:
    task_id: str
    run_id: str
    # Whole only when claiming (the row stores its payload); otherwise key_only().
    spec: TaskSpec
    status: str  # "pending" | "running" | "pending_fix" | "succeeded" | "failed" | "skipped"
    error: str | None = None
    # With status "running": claim the task and mark it running in one statement
    # (the result is that of a "pending" claim).
    claim: bool = False
    # With status "succeeded": the size of the run's plan (``TaskInstanceInput.run_tasks``).
    run_tasks: int | None = None


@dataclass(frozen=True)
class TaskStateResult:
    """``claimed`` is False when another task already holds the idempotency key."""

    claimed: bool
    status: str
    # A "succeeded" step that also marked the run succeeded (``TaskStateInput.run_tasks``).
    run_finished: bool = False


@dataclass(frozen=True)
class RunHandlerInput:
    task_id: str
    run_id: str
    activity_id: str
    spec: TaskSpec
    permit: PermitGrant | None = None  # set while the task holds a permit
    # On success, also mark the task succeeded in the same step (the workflow then
    # skips its own "succeeded" step): set for short handlers (TaskSpec.local).
    finish: bool = False
    # The size of the run's plan, for that "succeeded" (``TaskInstanceInput.run_tasks``).
    run_tasks: int | None = None


@dataclass(frozen=True)
class LocalTaskResult:
    """What ``run_local_task`` did: its claim (None: the database did not answer, the
    workflow claims the task itself) and whether it also marked the task succeeded.
    A claim that is not ``claimed``, or already an outcome, ran no handler."""

    claim: TaskStateResult | None
    finished: bool = False
    run_finished: bool = False  # and the run, as its last task to succeed


# --- permits (workers/permits) ---------------------------------------------------


@dataclass(frozen=True)
class PermitGrant:
    """A held permit as the handler sees it (``ctx.permit``)."""

    resource: str
    slot: str
    token: int  # fencing token: rises on every acquire of this (resource, slot)
    permit_run_id: str  # the PermitSlotWorkflow run holding the slot (flow slots: the run's)


@dataclass(frozen=True)
class PermitSlotInput:
    resource: str
    slot: str
    lease_seconds: float
    holder: str  # the workflow id of the holder (a task id)


@dataclass(frozen=True)
class PermitReleaseSignal:
    reason: str = "released"


@dataclass(frozen=True)
class PermitRoundInput:
    """One acquire round is about to start; ``busy`` slots were found in the last one."""

    resource: str
    busy: int = 0


@dataclass(frozen=True)
class PermitLimits:
    """A resource's current declaration (read at every round: changes apply to new acquires)."""

    capacity: int
    lease_seconds: float
    backoff_seconds: float
    max_backoff_seconds: float
    # False: not this holder's turn (flow concurrency's wait queue): wait without
    # trying a slot. Task permits always try.
    admit: bool = True


@dataclass(frozen=True)
class PermitAcquiredInput:
    resource: str
    slot: str
    permit_run_id: str
    holder: str
    lease_seconds: float
    waited_seconds: float  # workflow time from the first attempt to the acquire
    busy: int  # busy slots found in the last round before this acquire


@dataclass(frozen=True)
class PermitEndedInput:
    resource: str
    slot: str
    permit_run_id: str
    outcome: str  # "released" | "lease_expired"


# --- pause-and-fix (workers.fixes): the operator's Workflow Updates and the audit


@dataclass(frozen=True)
class FixRequest:
    """The argument of the ``fix``, ``skip`` and ``abort`` updates of a paused task.

    ``patch`` is a JSON merge patch (RFC 7396) to the task payload; only ``fix``
    reads it. ``actor`` is who acted (kept in the audit), ``note`` why.
    """

    actor: str
    patch: Any = None
    note: str | None = None


@dataclass(frozen=True)
class FixEntry:
    """One accepted operator action, as kept in task_fixes and the queryable state."""

    seq: int  # 1, 2, ... per task
    action: str  # "fix" | "skip" | "abort"
    actor: str
    error: str  # the error this action answered
    at: str  # ISO-8601 UTC (workflow time)
    patch: dict[str, Any] | None = None
    note: str | None = None


@dataclass(frozen=True)
class FixResult:
    task_id: str
    action: str
    seq: int


@dataclass(frozen=True)
class FixState:
    """The ``fix_state`` query of TaskInstanceWorkflow."""

    status: str  # "running" | "pending_fix" | "retrying" | "skipped" | "aborted" | "done"
    error: str | None
    payload: dict[str, Any]
    fixes: list[FixEntry]


@dataclass(frozen=True)
class RecordFixInput:
    task_id: str
    run_id: str
    task_type: str
    entry: FixEntry
    payload: dict[str, Any] | None = None  # a fix: the patched payload the retry runs with


@dataclass(frozen=True)
class HoldCheckInput:
    """A held run asks whether its activity is still paused (``hold_check``)."""

    run_id: str
    activity_id: str
    workflow_id: str
    round_no: int
    # The run's concurrency slot (flow.concurrency), if any: on resume the same step
    # makes the slot's first admission round, as start_run does for a run not held.
    flow_slot: FlowSlot | None = None


@dataclass(frozen=True)
class HoldCheckResult:
    state: str  # 'held' (still paused) | 'resumed' (row now running) | 'skipped'
    flow_grant: PermitGrant | None = None  # resumed and granted its slot at once


@dataclass(frozen=True)
class EndRunInput:
    """A run that ends without running to its end (workers/lifecycle.py): cancelled by
    Temporal (a cancel_on event), or past a timeout. ``run`` writes the row first if
    the run never did (cancelled before its first step)."""

    run: RunActivityInput
    status: str  # 'cancelled' | 'timed_out'
    # 'timeout:start' | 'timeout:finish' | 'cancel_on:<event_id>' (the cancel request's
    # reason); None: the request recorded by the router (flow_cancel_requests), if any.
    ended_by: str | None = None


@dataclass(frozen=True)
class EndRunResult:
    status: str  # the row's status now: a run that had finished keeps its outcome
    ended_by: str | None
