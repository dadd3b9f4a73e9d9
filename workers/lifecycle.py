"""How a run ends when it does not run to its end: cancelled (Temporal's cancellation,
requested by a ``flow.cancel_on`` event) or timed out (``flow.timeouts``).

Workflow code, imported by :mod:`workers.run_workflow` inside
``workflow.unsafe.imports_passed_through()``. Deterministic: the timeouts come from
the plan ``start_run`` recorded (``PlanTasksResult.timeouts``), never from the live
definition, and every decision from workflow time and recorded steps.

**Cancelled.** A cancellation reaches the run wherever it waits: a delayed start
(Temporal runs the first workflow task with the request already in history), the
``start_run`` step, a hold, its turn, a flow queue (the slot or the place in the queue
is released by :func:`workers.flow.slot.hold_flow_slot`), or its tasks (each task child
is cancelled, and a task in progress gets Temporal's activity cancellation through its
heartbeat). The run then ends in one step, ``end_run``: the row (written then if the run
never reached ``start_run``) is finished ``cancelled`` with ``ended_by`` the request's
reason (``cancel_on:<event_id>``; the router's recorded request when the reason is
empty), and the workflow closes as *cancelled*: Temporal's status says what happened,
the singleton's "is the holder running" check sees it closed, and a redelivered trigger
meets ``REJECT_DUPLICATE`` (and the ledger) as for any closed run: it never runs again.

**Timed out.** With ``timeouts`` in the plan, the run's body (waits and tasks) runs as a
task of its own while the workflow watches two deadlines from the run's creation
(``workflow_start_time``, the start request's time, before any throttle delay):
``start`` until the first task starts (restarted when a run held by its activity's
pause is resumed; not counted while it is held), ``finish`` until the run ends. Past
one, the body is cancelled (the same clean-up as above), ``end_run`` finishes the row
``timed_out`` with ``ended_by`` ``timeout:start`` or ``timeout:finish``, and the
workflow completes with that status in its result (the run ended by its own
declared policy, not by a failure to retry). A run whose plan has no timeouts runs its
body inline, exactly as before: no timer, no task, no command.

Histories recorded before this module took the cancellation path without the
``run-cancel-ends-run`` patch: they replay as they ran (the workflow closed cancelled
with its row left ``running``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from temporalio.exceptions import is_cancelled_exception

    from schemas.status import RunStatus
    from schemas.workflow_io import (
        EndRunInput,
        EndRunResult,
        RunActivityInput,
        RunActivityResult,
        RunTimeouts,
    )
    from workers.activities import RunActivities
    from workers.steps import db_step

# Patch id of the cancellation path: a cancelled run finishes its row (end_run).
CANCEL_ENDS_RUN = "run-cancel-ends-run"
TIMEOUT_START = "timeout:start"
TIMEOUT_FINISH = "timeout:finish"
# A deadline this close is reached (timers and workflow time are in milliseconds).
_EPSILON = timedelta(milliseconds=1)


def cancelled(exc: BaseException) -> bool:
    """``exc`` is a cancellation that ends the run as such (Temporal's, or a timeout's),
    not a failure. False on histories recorded before this path (no patch marker)."""
    return is_cancelled_exception(exc) and workflow.patched(CANCEL_ENDS_RUN)


def cancelled_by_temporal(exc: BaseException) -> bool:
    """``exc`` is Temporal's cancellation of the run (a request in its history)."""
    return (
        is_cancelled_exception(exc)
        and workflow.cancellation_reason() is not None
        and workflow.patched(CANCEL_ENDS_RUN)
    )


async def end_run(inp: RunActivityInput, status: str, ended_by: str | None) -> EndRunResult:
    return await db_step(RunActivities.end_run, EndRunInput(inp, status, ended_by))  # type: ignore[no-any-return]


async def end_cancelled(inp: RunActivityInput) -> None:
    """Temporal cancelled the run: its row says so, naming the request's reason."""
    await end_run(inp, RunStatus.CANCELLED, workflow.cancellation_reason() or None)


def ended(inp: RunActivityInput, status: str, tasks: int) -> RunActivityResult:
    return RunActivityResult(inp.run_id, status, tasks, 0, 0, 0)


class Clock:
    """What the deadlines read from the run: has its first task started, is it held by
    its activity's pause, and when was it resumed (each a callable on the workflow)."""

    def __init__(
        self,
        began: Callable[[], bool],
        held: Callable[[], bool],
        resumed_at: Callable[[], datetime | None],
    ) -> None:
        self.began, self.held, self.resumed_at = began, held, resumed_at

    def state(self) -> tuple[bool, bool, datetime | None]:
        return self.began(), self.held(), self.resumed_at()


def next_deadline(
    t: RunTimeouts, created: datetime, began: bool, held: bool, resumed_at: datetime | None
) -> tuple[datetime, str] | None:
    """The nearest deadline that applies now, and which (pure: unit-tested)."""
    deadlines: list[tuple[datetime, str]] = []
    if t.finish is not None:
        deadlines.append((created + timedelta(seconds=t.finish), TIMEOUT_FINISH))
    if t.start is not None and not began and not held:
        base = resumed_at if resumed_at is not None and resumed_at > created else created
        deadlines.append((base + timedelta(seconds=t.start), TIMEOUT_START))
    return min(deadlines) if deadlines else None


async def _watch(task: asyncio.Task[RunActivityResult], t: RunTimeouts, clock: Clock) -> str | None:
    """Wait until ``task`` is done (None) or a deadline passes (which one)."""
    created = workflow.info().workflow_start_time
    while not task.done():
        state = clock.state()

        def moved(state: tuple[bool, bool, datetime | None] = state) -> bool:
            return task.done() or clock.state() != state

        nearest = next_deadline(t, created, *state)
        if nearest is None:
            if t.start is None or state[0]:
                return None  # no deadline left: the body runs to its end
            # Held, with no finish deadline: wait for the resume (or the body's end).
            await workflow.wait_condition(moved)
            continue
        at, why = nearest
        left = at - workflow.now()
        if left <= _EPSILON:
            return why
        try:
            await workflow.wait_condition(moved, timeout=left)
        except TimeoutError:
            pass
    return None


async def guarded(
    inp: RunActivityInput,
    body: Awaitable[RunActivityResult],
    t: RunTimeouts,
    clock: Clock,
    tasks: int,
) -> RunActivityResult:
    """Run ``body`` under the plan's timeouts (see the module's docstring)."""
    task = asyncio.ensure_future(body)
    try:
        why = await _watch(task, t, clock)
    except asyncio.CancelledError:  # Temporal cancelled the run: the body stops too,
        # forwarding the request's reason to the task children it cancels.
        await _stop(task, workflow.cancellation_reason() or None)
        raise
    if why is None:
        return await task
    workflow.logger.info("run %s is past %s: cancelling it", inp.workflow_id, why)
    if await _stop(task, why):
        return task.result()  # it finished meanwhile: its outcome stands
    result = await end_run(inp, RunStatus.TIMED_OUT, why)
    return ended(inp, result.status, tasks)


async def _stop(task: asyncio.Task[RunActivityResult], why: str | None) -> bool:
    """Cancel ``task`` and wait for its clean-up; True when it ended anyway (a result)."""
    task.cancel(why)
    try:
        await task
    except BaseException as exc:
        if not is_cancelled_exception(exc):
            raise
        return False
    return True
