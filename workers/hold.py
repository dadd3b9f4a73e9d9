"""The wait of a run held while its activity is paused (``ingest activities pause``).

``start_run`` records a run of a paused activity ``held`` (``activities.paused_at`` is
read in the statement that inserts the row) and plans it as usual, but makes no
concurrency-slot round: the plan says ``held``. Before its first task the run then
waits here, holding nothing (no slot, no task, no worker slot): it asks ``hold_check``
(a local activity) whether its activity is still paused, and while it is, waits on a
timer that the ``activity_resumed`` signal cuts short, then asks again.

The first ask comes right after the held row was written, so a resume can never be
missed: ``ingest activities resume`` clears the pause *then* lists the held rows and
signals them; a run whose ask saw the pause has its row written before the resume's
listing, so the resume signals it (and a signal that arrives before the wait finds the
flag set). The timer (10 s, doubling up to 15 min) only covers a resume whose signals
were not all sent (the command died half-way, or the pause was cleared by hand), at a
cost of about six history events a round: a run held a whole day adds about 100
rounds, a month about 3,000.

``hold_check`` answers ``resumed`` (the row is now ``running``; with
``flow.concurrency`` the same step made the slot's first round), ``skipped`` (``resume
--skip-held`` marked the row ``skipped``: the run ends with no task), or ``held``.

A run whose plan is not ``held`` passes through with no step, timer or command: its
history is exactly the one it recorded before the pause existed.
"""

from __future__ import annotations

from dataclasses import replace

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from schemas.status import RunStatus
    from schemas.workflow_io import (
        ACTIVITY_RESUMED_SIGNAL,
        HoldCheckInput,
        HoldCheckResult,
        PlanTasksResult,
        RunActivityInput,
    )
    from workers.flow.slot import Waker
    from workers.hold_activities import RESUMED, HoldActivities
    from workers.steps import db_step

# Without a signal a held run asks again after this long, doubling up to the cap.
RECHECK_FIRST_SECONDS = 10.0
RECHECK_MAX_SECONDS = 900.0


async def wait_while_held(
    inp: RunActivityInput, planned: PlanTasksResult
) -> PlanTasksResult | None:
    """The plan to run once the activity is resumed; None when the run was skipped.

    A plan that is not held is returned as it is, at once (nothing awaited)."""
    if not planned.held:
        return planned
    waker = Waker()  # the flow slot's wake-up flag and timer, for the resume signal

    def on_resumed() -> None:
        waker.woken = True

    # Registered only by a held run: a signal sent before this is buffered by the SDK
    # and delivered now; runs that are not held never see the handler.
    workflow.set_signal_handler(ACTIVITY_RESUMED_SIGNAL, on_resumed)
    delay = RECHECK_FIRST_SECONDS
    round_no = 0
    while True:
        waker.woken = False  # a signal from now on is for the coming wait
        got: HoldCheckResult = await db_step(
            HoldActivities.hold_check,
            HoldCheckInput(
                inp.run_id, inp.activity_id, inp.workflow_id, round_no, planned.flow_slot
            ),
        )
        if got.state == RESUMED:
            workflow.logger.info("run %s resumed after %d round(s)", inp.run_id, round_no + 1)
            return replace(planned, held=False, flow_grant=got.flow_grant)
        if got.state == RunStatus.SKIPPED:
            return None
        await waker.wait(delay)
        delay = min(delay * 2, RECHECK_MAX_SECONDS)
        round_no += 1
