"""``hold_flow_slot``: what RunActivityWorkflow wraps its tasks in when the activity has
``flow.concurrency`` (the slot was decided by ``start_run``: ``PlanTasksResult.flow_slot``).

The slot is a permit of resource ``flow.{activity}[.{uuid5(key)}]`` (schemas.ids), held
by the run with the :class:`~workers.permits.semaphore.Semaphore` (child
``PermitSlotWorkflow``, lease, ``ParentClosePolicy.TERMINATE``, release pinned to the
permit run). Before each acquire round the run queues itself (``flow_round``) and
tries a slot only when its turn has come, so waiting runs are admitted in (priority,
arrival) order and hold nothing. Between rounds it waits on a timer that a
``flow_wake`` signal cuts short: after every release, ``flow_released`` names the
waiters whose turn it is and the releasing run signals them. The timer covers a
lost wake-up (a waiter whose worker died, a signal to a closed run).

Workflow code: deterministic, every decision from a recorded local activity.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from temporalio.exceptions import ApplicationError

    from schemas.workflow_io import (
        FlowAcquiredInput,
        FlowReleasedInput,
        FlowRoundInput,
        FlowSlot,
        FlowWake,
        PermitLimits,
    )
    from workers.permits.flow_activities import FlowActivities
    from workers.permits.semaphore import Semaphore
    from workers.steps import db_step

FLOW_WAKE_SIGNAL = "flow_wake"


class Waker:
    """The ``flow_wake`` flag of one run: set by the signal handler, cleared per round."""

    def __init__(self) -> None:
        self.woken = False

    async def wait(self, seconds: float) -> None:
        try:
            await workflow.wait_condition(lambda: self.woken, timeout=timedelta(seconds=seconds))
        except TimeoutError:
            pass


@asynccontextmanager
async def hold_flow_slot(slot: FlowSlot | None, holder: str, waker: Waker) -> AsyncIterator[None]:
    """Hold the run's concurrency slot for the body (nothing when ``slot`` is None)."""
    if slot is None:
        yield
        return

    async def limits(busy: int) -> PermitLimits:
        waker.woken = False  # a wake from now on is for the coming wait
        found: PermitLimits = await db_step(
            FlowActivities.flow_round, FlowRoundInput(slot, holder, busy)
        )
        return found

    sem = Semaphore(slot.resource, limits=limits, wait=waker.wait)
    try:
        async with sem.acquire(holder=holder) as held:
            await db_step(
                FlowActivities.flow_acquired,
                FlowAcquiredInput(
                    slot, holder, held.slot, held.run_id, held.lease_seconds, held.waited_seconds
                ),
            )
            yield
    except GeneratorExit:
        raise  # evicted from the cache: no workflow call can run now (see Semaphore)
    except BaseException:
        await _leave(slot, holder)
        raise
    await _leave(slot, holder)


async def _leave(slot: FlowSlot, holder: str) -> None:
    """Out of the queue or the slot: wake the runs whose turn it is now."""
    wake: FlowWake = await db_step(FlowActivities.flow_released, FlowReleasedInput(slot, holder))
    for wf_id in wake.workflow_ids:
        try:
            await workflow.get_external_workflow_handle(wf_id).signal(FLOW_WAKE_SIGNAL)
        except ApplicationError as exc:  # closed meanwhile: its timer was the fallback anyway
            workflow.logger.debug("flow wake of %s not delivered: %s", wf_id, exc.message)
