"""``Semaphore``: hold one of N permits of a resource from workflow code.

    sem = Semaphore("partner-api", capacity=3)
    async with sem.acquire(lease=timedelta(minutes=10), holder=workflow.info().workflow_id) as held:
        ...  # held.slot, held.run_id

Acquiring starts a child ``PermitSlotWorkflow`` with id ``permit:{resource}:{slot}``
on the slots in an order shuffled by ``workflow.random()`` (the same on replay,
spread across callers); ``WorkflowAlreadyStartedError`` means the slot is busy.
When every slot is busy it sleeps (``backoff``, doubling, capped at
``max_backoff``) and tries again. On exit, also on failure or cancellation, it
signals ``release`` to the exact child run it started:
``get_external_workflow_handle(id, run_id=first_execution_run_id)``.
``ChildWorkflowHandle.signal()`` would address the id alone, so a late release
from a holder whose lease expired would free the next holder's permit.

Everything here is workflow code: deterministic, no I/O, no metrics (the
permit activities count, see ``workers.permits.activities``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from temporalio.common import WorkflowIDReusePolicy
    from temporalio.exceptions import (
        ApplicationError,
        ChildWorkflowError,
        WorkflowAlreadyStartedError,
    )
    from temporalio.workflow import ParentClosePolicy

    from schemas.ids import permit_workflow_id
    from schemas.workflow_io import PermitLimits, PermitReleaseSignal, PermitSlotInput
    from workers.permits.workflow import RELEASE_SIGNAL, PermitSlotWorkflow, lease_grace

DEFAULT_LEASE = timedelta(minutes=10)
DEFAULT_BACKOFF = timedelta(seconds=5)
DEFAULT_MAX_BACKOFF = timedelta(minutes=1)

# Called before every acquire round with the number of busy slots the previous
# round met; returns the limits to use (so a capacity change applies at once).
LimitsFn = Callable[[int], Awaitable[PermitLimits]]
# Waits between rounds for at most the given seconds (default: workflow.sleep); flow
# concurrency returns early when a release signals that its turn may have come.
WaitFn = Callable[[float], Awaitable[None]]


def backoff_delay(round_no: int, initial: float, maximum: float) -> float:
    """Seconds to sleep after the ``round_no``-th (0-based) round of busy slots."""
    return float(min(maximum, initial * 2 ** min(round_no, 30)))


@dataclass(frozen=True)
class Held:
    resource: str
    slot: str
    workflow_id: str  # permit:{resource}:{slot}
    run_id: str  # the PermitSlotWorkflow run this holder started
    lease_seconds: float
    waited_seconds: float  # workflow time from the first attempt to the acquire
    busy: int  # busy slots met in the acquiring round before this one


class Semaphore:
    def __init__(
        self,
        resource: str,
        capacity: int | None = None,
        *,
        backoff: timedelta = DEFAULT_BACKOFF,
        max_backoff: timedelta = DEFAULT_MAX_BACKOFF,
        limits: LimitsFn | None = None,
        wait: WaitFn | None = None,
    ) -> None:
        if (capacity is None) == (limits is None):
            raise ValueError("give either capacity or limits")
        if capacity is not None and capacity < 1:
            raise ValueError("capacity must be >= 1")
        self.resource = resource
        self._fixed = PermitLimits(
            capacity or 1,
            DEFAULT_LEASE.total_seconds(),
            backoff.total_seconds(),
            max_backoff.total_seconds(),
        )
        self._limits = limits
        self._wait = wait

    async def _current(self, busy: int) -> PermitLimits:
        return self._fixed if self._limits is None else await self._limits(busy)

    @asynccontextmanager
    async def acquire(
        self, *, lease: timedelta | None = None, holder: str | None = None
    ) -> AsyncIterator[Held]:
        """Hold one slot for the body; released on exit, whatever ends the body."""
        held, handle = await self._acquire(lease, holder or workflow.info().workflow_id)
        try:
            yield held
        except GeneratorExit:
            # The worker evicted this workflow from its cache (shutdown, a full cache):
            # the coroutine is being torn down, not ended, and no workflow call can run
            # now. The slot stays held; the workflow resumes on a worker by replay and
            # releases it there.
            raise
        except BaseException:
            await self._release(held, handle)
            raise
        await self._release(held, handle)

    async def _acquire(
        self, lease: timedelta | None, holder: str
    ) -> tuple[Held, workflow.ChildWorkflowHandle[PermitSlotWorkflow, str]]:
        started = workflow.now()
        busy = 0
        round_no = 0
        while True:
            lim = await self._current(busy)
            lease_s = lease.total_seconds() if lease is not None else lim.lease_seconds
            # Not admitted (a wait queue says others are ahead): try no slot this round.
            slots = [str(i) for i in range(lim.capacity)] if lim.admit else []
            workflow.random().shuffle(slots)
            busy = 0
            for slot in slots:
                wf_id = permit_workflow_id(self.resource, slot)
                try:
                    handle = await workflow.start_child_workflow(
                        PermitSlotWorkflow.run,
                        PermitSlotInput(self.resource, slot, lease_s, holder),
                        id=wf_id,
                        id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
                        parent_close_policy=ParentClosePolicy.TERMINATE,
                        execution_timeout=timedelta(seconds=lease_s + lease_grace(lease_s)),
                    )
                except WorkflowAlreadyStartedError:
                    busy += 1
                    continue
                run_id = handle.first_execution_run_id
                assert run_id is not None
                waited = (workflow.now() - started).total_seconds()
                return Held(self.resource, slot, wf_id, run_id, lease_s, waited, busy), handle
            delay = backoff_delay(round_no, lim.backoff_seconds, lim.max_backoff_seconds)
            await (workflow.sleep(delay) if self._wait is None else self._wait(delay))
            round_no += 1

    async def _release(
        self, held: Held, handle: workflow.ChildWorkflowHandle[PermitSlotWorkflow, str]
    ) -> None:
        # Pinned to the run this holder started: if its lease expired and someone
        # else holds the slot now, this signal finds a closed run and frees nothing.
        target = workflow.get_external_workflow_handle(held.workflow_id, run_id=held.run_id)
        try:
            await target.signal(RELEASE_SIGNAL, PermitReleaseSignal("released"))
        except ApplicationError as exc:  # ExternalWorkflowExecutionNotFound: already closed
            workflow.logger.warning(
                "permit %s run %s had already ended (lease expired or operator release): %s",
                held.workflow_id, held.run_id, exc.message,
            )  # fmt: skip
        try:
            # Wait for it to close, so the slot is free before the holder moves on.
            outcome = await handle
        except ChildWorkflowError as exc:  # terminated or timed out by the server
            outcome = f"closed: {exc.cause or exc}"
        workflow.logger.debug("permit %s run %s: %s", held.workflow_id, held.run_id, outcome)
