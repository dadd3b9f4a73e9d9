"""The activities of RunActivityWorkflow and TaskInstanceWorkflow.

Methods on one class that receives its pool, handler registry and shared clients
in ``__init__`` (no module-level globals), so tests and the worker build their own.
Input errors that retrying cannot fix raise ``ApplicationError(non_retryable=True)``;
everything else (database or broker down) raises normally and Temporal retries.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import replace
from datetime import datetime
from typing import Any, NoReturn, TypeVar

import asyncpg
from pydantic import ValidationError
from temporalio import activity
from temporalio.exceptions import ApplicationError, ApplicationErrorCategory

from pipeline import tracing
from pipeline.metrics import DUPLICATES_SUPPRESSED, LAYER_IDEMPOTENCY_KEY, start_at_zero
from schemas.definitions import TaskDef
from schemas.flow.concurrency import flow_slot_for
from schemas.flow.io import FlowAcquireInput, FlowWake
from schemas.flow.spec import FlowDef, FlowKeyMissing
from schemas.ids import run_id_for
from schemas.status import RUN_OUTCOMES, TASK_OUTCOMES, TASK_TRANSITIONS, RunStatus, TaskStatus
from schemas.workflow_io import (
    TRIGGER_CRON,
    TRIGGER_EVENT,
    EndRunInput,
    EndRunResult,
    FinishRunInput,
    LocalTaskResult,
    LogRunInput,
    LogRunResult,
    PlanTasksInput,
    PlanTasksResult,
    RunActivityInput,
    RunHandlerInput,
    RunTimeouts,
    TaskSpec,
    TaskStateInput,
    TaskStateResult,
)
from workers import store
from workers.fix_audit import FIX_ACTIONS
from workers.flow.metrics import FLOW_RUNS_ENDED, ended_cause
from workers.flow.order_store import close as order_close
from workers.flow.order_store import turn as order_turn
from workers.flow.slot_activities import DEFAULT_LEASE_SECONDS, admission_round, granted
from workers.flow.slot_activities import release as flow_release
from workers.handlers import PermanentTaskError, Registry, Resources, TaskContext
from workers.metrics import (
    RUN_EXISTING,
    RUN_INSERTED,
    RUNS_HELD,
    RUNS_LOGGED,
    TASK_FIXES,
    TASK_INSTANCES,
)
from workers.permits.fencing import permit_for
from workers.planning import PlanError, plan

log = logging.getLogger(__name__)
T = TypeVar("T")
# Every status pipeline_task_instances_total counts (schemas.status).
TASK_STATUSES: tuple[str, ...] = tuple(TaskStatus)


def start_metrics_at_zero(task_types: Iterable[str]) -> None:
    """Every series the runs part counts (its runs, tasks and fixes), at 0 from the start
    (see :mod:`pipeline.metrics`)."""
    start_at_zero(RUNS_LOGGED, result=[RUN_INSERTED, RUN_EXISTING])
    start_at_zero(TASK_INSTANCES, task_type=task_types, status=TASK_STATUSES)
    start_at_zero(
        DUPLICATES_SUPPRESSED,
        component=["worker"],
        trigger=[TRIGGER_EVENT, TRIGGER_CRON],
        layer=[LAYER_IDEMPOTENCY_KEY],
    )
    start_at_zero(TASK_FIXES, action=FIX_ACTIONS)


def _permanent(message: str, kind: str = "InvalidInput") -> NoReturn:
    raise ApplicationError(message, type=kind, non_retryable=True)


def _check_run(run: RunActivityInput) -> None:
    expected = str(run_id_for(run.workflow_id))
    if run.run_id != expected:
        _permanent(f"run_id {run.run_id} is not run_id_for({run.workflow_id!r}) = {expected}")
    if run.trigger_kind not in (TRIGGER_EVENT, TRIGGER_CRON):
        _permanent(f"trigger_kind must be 'event' or 'cron', got {run.trigger_kind!r}")
    try:
        uuid.UUID(run.activity_id)
        for value in (run.scheduled_for, run.context_window_start, run.context_window_end):
            if value:
                datetime.fromisoformat(value)
    except ValueError as exc:
        _permanent(f"bad run input: {exc}")


async def _heartbeating(work: Awaitable[T], interval: float | None) -> T:
    """Await ``work``, heartbeating every ``interval`` s so a dead worker is noticed.

    ``None`` (a local activity, or one without a heartbeat timeout): awaited as it is,
    without a task of its own; a cancellation reaches it directly."""
    if interval is None:
        return await work
    task = asyncio.ensure_future(work)
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=interval)
            if done:
                return task.result()
            activity.heartbeat()
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(BaseException):
                await task


def _trace_id() -> str | None:
    """The trace of the step running now (the run's, through the tracing interceptor),
    for ``activity_runs.trace_id``; None when tracing is off."""
    ids = tracing.current_ids()
    return ids[0] if ids is not None else None


def _plan(
    run: RunActivityInput, raw: list[object] | None, short: frozenset[str]
) -> PlanTasksResult:
    """The run's planned tasks from the activity's ``tasks`` (None: no such activity).

    ``short``: the registry's short handlers (their tasks run them as local activities).
    """
    if raw is None:
        _permanent(f"activity {run.activity_id} does not exist", "UnknownActivity")
    defs: list[TaskDef] = []
    for i, item in enumerate(raw):
        try:
            defs.append(TaskDef.model_validate(item))
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err["loc"])
            _permanent(f"activity {run.activity_id} tasks[{i}].{where}: {err['msg']}")
    try:
        return PlanTasksResult(tasks=plan(defs, run, short))
    except PlanError as exc:
        _permanent(f"activity {run.activity_id}: {exc}", "PlanError")


def _flow_def(raw: object | None) -> FlowDef | None:
    return None if raw is None else FlowDef.model_validate(raw)


def _count(spec: TaskSpec, row: store.TaskRow, claimed_running: bool = False) -> None:
    """Count a task's change of state (``pipeline_task_instances_total``)."""
    if not row.changed:
        return
    if claimed_running and row.status == TaskStatus.RUNNING:  # claimed and running at once
        TASK_INSTANCES.labels(task_type=spec.task_type, status=TaskStatus.PENDING).inc()
    TASK_INSTANCES.labels(task_type=spec.task_type, status=row.status).inc()


class RunActivities:
    def __init__(
        self,
        pool: asyncpg.Pool,
        registry: Registry,
        resources: Resources | None = None,
        flow_lease_seconds: float = DEFAULT_LEASE_SECONDS,
    ) -> None:
        self._pool = pool
        self._registry = registry
        self._short = registry.short()
        self._resources = resources or Resources()
        self._flow_lease = flow_lease_seconds  # a flow slot start_run grants (flow.concurrency)

    def all(self) -> list[Callable[..., Any]]:
        """Every activity, for ``Worker(activities=...)``."""
        return [self.log_run, self.plan_tasks, self.start_run, self.set_task_state,
                self.run_handler, self.run_local_task, self.finish_run,
                self.end_run]  # fmt: skip

    @activity.defn(name="log_run")
    async def log_run(self, inp: LogRunInput) -> LogRunResult:
        """Record the run once: a retry or replay finds the row and says 'existing'."""
        _check_run(inp.run)
        inserted = await store.insert_run(self._pool, inp.run, _trace_id())
        RUNS_LOGGED.labels(result=RUN_INSERTED if inserted else RUN_EXISTING).inc()
        return LogRunResult(inserted=inserted)

    @activity.defn(name="plan_tasks")
    async def plan_tasks(self, inp: PlanTasksInput) -> PlanTasksResult:
        """The run's tasks, from the activity's definitions as they are now.

        The result is recorded in workflow history, so later edits to the
        definition never change the plan of a run already planned.
        """
        _check_run(inp.run)
        raw = await store.activity_tasks(self._pool, inp.run.activity_id)
        return _plan(inp.run, raw, self._short)

    @activity.defn(name="start_run")
    async def start_run(self, inp: PlanTasksInput) -> PlanTasksResult:
        """``log_run`` and ``plan_tasks`` in one step and one statement.

        The run row is inserted (or found: insert-or-nothing, as ``log_run``) before
        the plan is checked, so a run whose plan fails is recorded and can be finished
        ``failed``, exactly as with the two steps.

        With ``flow.concurrency`` the step also runs the slot's first admission round
        (``flow_slot_acquire``, idempotent per holder: a retried step gets the same
        grant): when the limit is not reached the run holds its slot with no step of
        its own. A run refused here is queued, and asks ``flow_acquire`` in rounds.

        With ``flow.ordered`` the step also reads the run's place in its key's line (one
        statement): at its turn the run goes on with no step of its own; else it waits
        (workers/flow/order.py), and its slot round, if any, is made only at its turn.
        """
        _check_run(inp.run)
        inserted, raw, flow, held = await store.insert_run_and_tasks(
            self._pool, inp.run, _trace_id()
        )
        RUNS_LOGGED.labels(result=RUN_INSERTED if inserted else RUN_EXISTING).inc()
        planned = _plan(inp.run, raw, self._short)
        try:
            flow_def = _flow_def(flow)
            slot = flow_slot_for(inp.run.activity_id, flow_def, inp.run.event)
        except (FlowKeyMissing, ValidationError) as exc:
            _permanent(f"activity {inp.run.activity_id} flow: {exc}", "PlanError")
        if flow_def is not None and flow_def.timeouts is not None:  # workers/lifecycle.py
            t = flow_def.timeouts
            planned = replace(planned, timeouts=RunTimeouts(t.start, t.finish))
        if flow_def is not None and flow_def.ordered is not None:  # workers/flow/order.py
            place = await order_turn(self._pool, inp.run.workflow_id)
            if place is not None:
                planned = replace(planned, flow_order=place.place)
        if held:  # its activity is paused: no slot round until it is resumed (workers/hold.py)
            if inserted:
                RUNS_HELD.labels(activity=inp.run.activity_id).inc()
            return replace(planned, flow_slot=slot, held=True)
        if slot is None:
            return planned
        if planned.flow_order is not None and not planned.flow_order.turn:
            return replace(planned, flow_slot=slot)  # its slot round comes at its turn
        first = FlowAcquireInput(slot, inp.run.workflow_id, activity.info().workflow_run_id or "")
        got = await admission_round(self._pool, first, self._flow_lease)
        return replace(planned, flow_slot=slot, flow_grant=granted(first, got))

    @activity.defn(name="set_task_state")
    async def set_task_state(self, inp: TaskStateInput) -> TaskStateResult:
        """Upsert the task_instances row; ``claimed=False`` means 'a duplicate, skip it'."""
        if inp.status not in TASK_TRANSITIONS:
            _permanent(f"status must be one of {TASK_TRANSITIONS}, got {inp.status!r}")
        return await self._set_state(inp)

    async def _set_state(self, inp: TaskStateInput) -> TaskStateResult:
        claim_running = inp.claim and inp.status == TaskStatus.RUNNING
        if inp.status == TaskStatus.PENDING or claim_running:
            row = await store.claim_task(
                self._pool, inp.task_id, inp.run_id, inp.spec, running=claim_running
            )
        else:
            error = inp.error
            if inp.status == TaskStatus.CANCELLED and not error:
                error = f"cancelled: {await store.run_end_reason(self._pool, inp.run_id)}"
            found = await store.advance_task(
                self._pool, inp.task_id, inp.status, error, inp.run_tasks
            )
            if found is None and inp.status == TaskStatus.FAILED:
                # Its claim was refused for good (a data error): no row was written, and
                # the failure is recorded on one of its own (no key, no payload).
                found = await store.fail_unclaimed(
                    self._pool, inp.task_id, inp.run_id, inp.spec, inp.error
                )
            if found is None and inp.status == TaskStatus.CANCELLED:
                # Cancelled before its claim wrote a row: nothing ran, nothing to mark.
                return TaskStateResult(claimed=False, status=TaskStatus.CANCELLED)
            if found is None:
                _permanent(f"task {inp.task_id} has no row: set it pending first")
            row = found
        _count(inp.spec, row, claimed_running=claim_running)
        if row.status == TaskStatus.DUPLICATE and row.changed:
            # Content dedupe: shown next to the router's ledger/temporal layers.
            trigger = (inp.spec.payload.get("trigger") or {}).get("trigger_kind") or "unknown"
            DUPLICATES_SUPPRESSED.labels(
                component="worker", trigger=trigger, layer=LAYER_IDEMPOTENCY_KEY
            ).inc()
            log.info("task %s is a duplicate of %s", inp.task_id, row.duplicate_of)
        return TaskStateResult(
            claimed=row.status != TaskStatus.DUPLICATE,
            status=row.status,
            run_finished=row.run_finished,
        )

    @activity.defn(name="run_local_task")
    async def run_local_task(self, inp: RunHandlerInput) -> LocalTaskResult:
        """A local task's claim, handler and finish in one step (``claim_in_step``).

        The claim is the one ``set_task_state`` makes (claimed and running at once,
        idempotent): a retried step finds the row running and runs the handler again;
        a duplicate, or a task finished earlier, runs no handler. The claim is best
        effort, as the finish is: a database error must not spend the handler's
        attempts, so the step answers ``claim=None`` and the workflow claims the task
        with its own step (retried without limit), then runs ``run_handler``.
        """
        claim_input = TaskStateInput(
            inp.task_id, inp.run_id, inp.spec, TaskStatus.RUNNING, claim=True
        )
        try:
            claim = await self._set_state(claim_input)
        except Exception as exc:
            log.warning("could not claim %s, the workflow will: %s", inp.task_id, exc)
            return LocalTaskResult(None)
        if not claim.claimed or claim.status in TASK_OUTCOMES:
            return LocalTaskResult(claim)
        row = await self._handle(inp)
        return LocalTaskResult(claim, row is not None, row is not None and row.run_finished)

    @activity.defn(name="run_handler")
    async def run_handler(self, inp: RunHandlerInput) -> bool | None:
        """Run the task's handler; a PermanentTaskError fails the task without retry.

        With ``inp.finish``: True when this step also marked the task succeeded.
        """
        row = await self._handle(inp)
        return row is not None if inp.finish else None

    async def _handle(self, inp: RunHandlerInput) -> store.TaskRow | None:
        """The handler run, and with ``inp.finish`` (or a staged message) the row that
        marked the task succeeded (None: not written here, the workflow's step will)."""
        handler = self._registry.get(inp.spec.task_type)
        if handler is None:
            # A definition `activities apply` would refuse (stored before it checked, or
            # written straight into the table): one line, and the task fails. BENIGN keeps
            # the SDK from logging the same failure again with a traceback.
            message = (
                f"no handler for task type {inp.spec.task_type!r} "
                f"(registered: {', '.join(self._registry.names())})"
            )
            log.error("task %s fails: %s", inp.task_id, message)
            raise ApplicationError(
                message,
                type="UnknownTaskType",
                non_retryable=True,
                category=ApplicationErrorCategory.BENIGN,
            )
        info = activity.info()
        if info.attempt > 1:  # the claim (or a fix's retry) counted the first attempt
            await self._note_attempt(inp.task_id, info.attempt)
        ctx = TaskContext(
            task_id=inp.task_id,
            run_id=inp.run_id,
            activity_id=inp.activity_id,
            spec=inp.spec,
            attempt=info.attempt,
            resources=self._resources,
            permit=permit_for(self._pool, inp.permit),
        )
        hb = info.heartbeat_timeout.total_seconds() / 3 if info.heartbeat_timeout else None
        try:
            await _heartbeating(handler(ctx), hb)
        except PermanentTaskError as exc:
            await self._note_attempt(inp.task_id, info.attempt, str(exc))
            raise ApplicationError(str(exc), type=type(exc).__name__, non_retryable=True) from exc
        except Exception as exc:
            await self._note_attempt(inp.task_id, info.attempt, f"{type(exc).__name__}: {exc}")
            raise
        if ctx.staged:
            return await self._finish_with_outbox(inp, ctx.staged)
        return await self._finish(inp) if inp.finish else None

    async def _finish_with_outbox(
        self, inp: RunHandlerInput, staged: list[store.OutboxMessage]
    ) -> store.TaskRow:
        """Mark the task succeeded and write its outbox message in one transaction.

        Not best effort, unlike ``_finish``: the outbox row is the handler's side
        effect, so a database error fails the attempt and Temporal retries it (the
        handler is pure; the insert is keyed by the task id, so a retry after a
        commit whose answer was lost writes nothing twice). A regular (not local)
        activity writes here too and returns None; the workflow's own "succeeded"
        step is then a repeat that changes nothing.
        """
        if len(staged) != 1:  # the outbox key is the task id: one message per task
            _permanent(f"task {inp.task_id} staged {len(staged)} messages; one is allowed")
        (message,) = staged
        row = await store.finish_with_outbox(self._pool, inp.task_id, message, inp.run_tasks)
        if row is None:
            _permanent(f"task {inp.task_id} has no row: set it pending first")
        if row.status != TaskStatus.SUCCEEDED:
            log.warning("task %s is %s: its message was not emitted", inp.task_id, row.status)
        _count(inp.spec, row)
        return row

    async def _finish(self, inp: RunHandlerInput) -> store.TaskRow | None:
        """Mark the task succeeded after its handler did; None leaves it to the workflow.

        Best effort: the handler has succeeded, and a database error here must not
        fail it (or run it again, as a failed attempt would). The workflow's own
        step, retried without limit like every bookkeeping step, then writes it.
        A repeat finds the task succeeded already and changes nothing.
        """
        try:
            row = await store.advance_task(
                self._pool, inp.task_id, TaskStatus.SUCCEEDED, run_tasks=inp.run_tasks
            )
        except Exception as exc:
            log.warning("could not mark %s succeeded, the workflow will: %s", inp.task_id, exc)
            return None
        if row is None:
            return None  # no row: the workflow's step reports it
        _count(inp.spec, row)
        return row

    async def _note_attempt(self, task_id: str, attempt: int, error: str | None = None) -> None:
        """Note an attempt (and its error) on the task row, best effort.

        A database outage must neither fail a handler that does not need the
        database (that would spend its attempts, and fail the task, while the
        database is away) nor hide the handler's own error.
        """
        try:
            await store.record_attempt(self._pool, task_id, attempt, error)
        except Exception as exc:
            log.warning("could not note attempt %d of %s: %s", attempt, task_id, exc)

    @activity.defn(name="finish_run")
    async def finish_run(self, inp: FinishRunInput) -> FlowWake | None:
        """The run's outcome; with ``inp.release``, its flow slot released in the same
        step: the answer names the waiting runs to wake (None: it held no slot)."""
        if inp.status not in RUN_OUTCOMES:
            _permanent(f"run status must be one of {RUN_OUTCOMES}, got {inp.status!r}")
        if not await store.finish_run(self._pool, inp.run_id, inp.status):
            _permanent(f"no activity_runs row for run {inp.run_id}", "UnknownRun")
        woken = None if inp.release is None else await flow_release(self._pool, inp.release)
        if inp.in_line:  # flow.ordered: close its place, wake the next run of its line
            nxt = await order_close(self._pool, inp.run_id, inp.status)
            if nxt is not None:
                woken = FlowWake([*(woken.workflow_ids if woken else []), nxt])
        return woken

    @activity.defn(name="end_run")
    async def end_run(self, inp: EndRunInput) -> EndRunResult:
        """A run cancelled or timed out (workers/lifecycle.py): its row finished with
        ``ended_by``, written first if the run was cancelled before its first step."""
        if inp.status not in (RunStatus.CANCELLED, RunStatus.TIMED_OUT):
            _permanent(f"end_run status must be cancelled or timed_out, got {inp.status!r}")
        status, ended_by, changed = await store.end_run(
            self._pool, inp.run, inp.status, inp.ended_by
        )
        if changed:
            cause = ended_cause(ended_by)
            FLOW_RUNS_ENDED.labels(activity=inp.run.activity_id, cause=cause).inc()
        return EndRunResult(status, ended_by)
