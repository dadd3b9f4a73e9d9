"""``hold_flow_slot``: what RunActivityWorkflow wraps its tasks in when the activity has
``flow.concurrency`` (the slot was decided by ``start_run``: ``PlanTasksResult.flow_slot``).

The slot is a ``permit_slots`` row of resource ``flow.{activity}[.{uuid5(key)}]``
(schemas.ids), and PostgreSQL is its one lock (``flow_store``, migration 0013). Each
admission round, under the resource's advisory lock, returns this run's slot if it
holds one (a retried or replayed step), takes a free one if slots held + live waiters
ahead of it (by priority, then arrival) < limit, or queues the run and answers how
long to wait. The first round runs inside ``start_run`` and the release inside
``finish_run``: when the limit is not reached a slot costs no step of its own, only
two statements in steps the run has anyway (no child workflow, signal or timer). A
queued run asks again in rounds of its own local activity, ``flow_acquire``; a run
that fails or is cancelled leaves in a ``flow_release`` step.

A run that must wait holds nothing: it waits on a timer that a ``flow_wake`` signal
cuts short. Every release (``finish_run``'s or ``flow_release``'s) names the waiters
whose turn it is and the releasing run signals them (:func:`wake`); the timer covers a
lost wake-up (a waiter whose worker died, a signal to a closed run).

Workflow code: deterministic, every decision from a recorded local activity.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from temporalio.exceptions import ApplicationError

    from schemas.flow.io import FlowAcquired, FlowAcquireInput, FlowWake
    from schemas.workflow_io import FlowReleaseInput, FlowSlot, PermitGrant
    from workers.flow.slot_activities import FlowActivities
    from workers.steps import db_step
    from workers.tracing_waits import FLOW_SLOT, waited

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


@dataclass
class FlowHold:
    """The slot a run holds inside :func:`hold_flow_slot`: the run's finish step releases
    it (``release_input``, then :func:`wake`), else the block's exit does."""

    slot: FlowSlot
    holder: str
    released: bool = False

    def release_input(self) -> FlowReleaseInput:
        self.released = True  # the step that takes this input releases it (idempotent)
        return FlowReleaseInput(self.slot, self.holder)


@asynccontextmanager
async def hold_flow_slot(
    slot: FlowSlot | None, holder: str, waker: Waker, grant: PermitGrant | None = None
) -> AsyncIterator[FlowHold | None]:
    """Hold the run's concurrency slot for the body (nothing when ``slot`` is None).

    ``grant``: the slot as ``start_run`` granted it (no round of its own). The body may
    release the slot in its finish step (:meth:`FlowHold.release_input`); a body that
    fails, is cancelled or ends without that releases it here.
    """
    if slot is None:
        yield None
        return
    hold = FlowHold(slot, holder)
    try:
        if grant is None:
            grant = await _acquire(slot, holder, waker)
        workflow.logger.debug("flow slot %s:%s token %s", grant.resource, grant.slot, grant.token)
        yield hold
    except GeneratorExit:
        # Evicted from the worker's cache (shutdown, a full cache): the coroutine is torn
        # down, not ended, and no workflow call can run now. The slot (or the place in
        # the queue) stays; the run resumes on a worker by replay and releases it there.
        raise
    except BaseException:  # failed or cancelled, while waiting or holding the slot
        await _leave(hold)
        raise
    if not hold.released:
        await _leave(hold)


async def _acquire(slot: FlowSlot, holder: str, waker: Waker) -> PermitGrant:
    run_id = workflow.info().run_id
    since = workflow.now()  # queued by start_run's round, just before
    round_no = 0
    while True:
        waker.woken = False  # a wake from now on is for the coming wait
        got: FlowAcquired = await db_step(
            FlowActivities.flow_acquire, FlowAcquireInput(slot, holder, run_id, round_no)
        )
        if got.grant is not None:
            waited(FLOW_SLOT, since=since, flow_resource=slot.resource, flow_key=slot.key,
                   flow_limit=slot.limit, activity_id=slot.activity_id, rounds=round_no + 1,
                   flow_slot=got.grant.slot)  # fmt: skip
            return got.grant
        await waker.wait(got.retry_seconds)
        round_no += 1


async def _leave(hold: FlowHold) -> None:
    """Out of the queue or the slot, in a step of its own."""
    await wake(await db_step(FlowActivities.flow_release, hold.release_input()))


async def wake(woken: FlowWake | None) -> None:
    """Signal the runs whose turn a release made."""
    for wf_id in woken.workflow_ids if woken is not None else ():
        try:
            await workflow.get_external_workflow_handle(wf_id).signal(FLOW_WAKE_SIGNAL)
        except ApplicationError as exc:  # closed meanwhile: its timer was the fallback anyway
            workflow.logger.debug("flow wake of %s not delivered: %s", wf_id, exc.message)
