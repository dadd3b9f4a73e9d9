"""``hold_flow_slot``: what RunActivityWorkflow wraps its tasks in when the activity has
``flow.concurrency`` (the slot was decided by ``start_run``: ``PlanTasksResult.flow_slot``).

The slot is a ``permit_slots`` row of resource ``flow.{activity}[.{uuid5(key)}]``
(schemas.ids), and PostgreSQL is its one lock (``flow_store``, migration 0013). Each
round is one local activity, ``flow_acquire``: under the resource's advisory lock it
returns this run's slot if it holds one (a retried or replayed step), takes a free one
if slots held + live waiters ahead of it (by priority, then arrival) < limit, or
queues the run and answers how long to wait. When the limit is not reached a slot
costs that one local activity and ``flow_release`` at the end, both inside workflow
tasks the run has anyway: no child workflow, no signal, no timer.

A run that must wait holds nothing: it waits on a timer that a ``flow_wake`` signal
cuts short. After every release, ``flow_release`` names the waiters whose turn it is
and the releasing run signals them; the timer covers a lost wake-up (a waiter whose
worker died, a signal to a closed run).

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
        FlowAcquired,
        FlowAcquireInput,
        FlowReleaseInput,
        FlowSlot,
        FlowWake,
        PermitGrant,
    )
    from workers.permits.flow_activities import FlowActivities
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
    try:
        grant = await _acquire(slot, holder, waker)
        workflow.logger.debug("flow slot %s:%s token %s", grant.resource, grant.slot, grant.token)
        yield
    except GeneratorExit:
        # Evicted from the worker's cache (shutdown, a full cache): the coroutine is torn
        # down, not ended, and no workflow call can run now. The slot (or the place in
        # the queue) stays; the run resumes on a worker by replay and releases it there.
        raise
    except BaseException:  # failed or cancelled, while waiting or holding the slot
        await _leave(slot, holder)
        raise
    await _leave(slot, holder)


async def _acquire(slot: FlowSlot, holder: str, waker: Waker) -> PermitGrant:
    run_id = workflow.info().run_id
    round_no = 0
    while True:
        waker.woken = False  # a wake from now on is for the coming wait
        got: FlowAcquired = await db_step(
            FlowActivities.flow_acquire, FlowAcquireInput(slot, holder, run_id, round_no)
        )
        if got.grant is not None:
            return got.grant
        await waker.wait(got.retry_seconds)
        round_no += 1


async def _leave(slot: FlowSlot, holder: str) -> None:
    """Out of the queue or the slot: wake the runs whose turn it is now."""
    wake: FlowWake = await db_step(FlowActivities.flow_release, FlowReleaseInput(slot, holder))
    for wf_id in wake.workflow_ids:
        try:
            await workflow.get_external_workflow_handle(wf_id).signal(FLOW_WAKE_SIGNAL)
        except ApplicationError as exc:  # closed meanwhile: its timer was the fallback anyway
            workflow.logger.debug("flow wake of %s not delivered: %s", wf_id, exc.message)
