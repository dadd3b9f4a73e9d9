"""``PermitSlotWorkflow``: one running execution per held permit slot.

Its id, ``permit:{resource}:{slot}`` (schemas.ids), is the lock: Temporal refuses
a second start of a running id, so whoever started it holds the slot until it
closes. Three layers close it:

1. a ``release`` signal (the holder's Semaphore on exit, or an operator);
2. the lease: ``wait_condition(timeout=lease)`` ends it as ``lease_expired``;
3. the server: it is started with ``execution_timeout`` = lease + a small grace,
   so a permit that no worker runs (workers down) still cannot leak its slot,
   and ``ParentClosePolicy.TERMINATE``, so a holder that closes frees it at once.

The grace exists so the in-workflow expiry (2) normally wins the race with the
server timeout (3) and is recorded (``permit_ended``, the lease-expired metric);
were both equal, the server would always win, because the timer starts when the
first workflow task runs, a little after the execution timeout's clock.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from temporalio.common import RetryPolicy

    from schemas.workflow_io import PermitEndedInput, PermitReleaseSignal, PermitSlotInput
    from workers.permits.activities import PermitActivities

RELEASE_SIGNAL = "release"


def lease_grace(lease_seconds: float) -> float:
    """Extra seconds the server timeout gives the in-workflow lease timer: 10%, 1..60 s."""
    return min(60.0, max(1.0, lease_seconds * 0.1))


@workflow.defn(name="PermitSlotWorkflow")
class PermitSlotWorkflow:
    def __init__(self) -> None:
        self._released: str | None = None

    @workflow.signal(name=RELEASE_SIGNAL)
    def release(self, sig: PermitReleaseSignal) -> None:
        if self._released is None:
            self._released = sig.reason or "released"

    @workflow.run
    async def run(self, inp: PermitSlotInput) -> str:
        # The lease counts from the start, not from the first task (a late worker).
        elapsed = (workflow.now() - workflow.info().workflow_start_time).total_seconds()
        remaining = max(0.001, inp.lease_seconds - elapsed)
        try:
            await workflow.wait_condition(
                lambda: self._released is not None, timeout=timedelta(seconds=remaining)
            )
            outcome = "released"
        except TimeoutError:
            outcome = "lease_expired"
            workflow.logger.warning(
                "permit %s lease of %ss expired (holder %s)",
                workflow.info().workflow_id, inp.lease_seconds, inp.holder,
            )  # fmt: skip
        try:
            # Short and bounded: bookkeeping must never keep the slot busy.
            await workflow.execute_local_activity_method(
                PermitActivities.permit_ended,
                PermitEndedInput(inp.resource, inp.slot, workflow.info().run_id, outcome),
                start_to_close_timeout=timedelta(seconds=5),
                schedule_to_close_timeout=timedelta(seconds=15),
                retry_policy=RetryPolicy(maximum_interval=timedelta(seconds=2)),
            )
        except Exception as exc:  # the slot is freed anyway; only the bookkeeping is late
            workflow.logger.warning("permit_ended not recorded: %s", exc)
        return outcome
