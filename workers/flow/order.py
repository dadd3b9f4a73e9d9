"""``wait_turn``: a run of a flow.ordered activity waits here, before its first task,
until every run before it in its key's line is done.

``start_run`` read the run's place with its plan (``PlanTasksResult.flow_order``, one
statement in that step): a run whose turn it already was passes through with no step,
timer or command, as does a run that has no place. A run behind an open place holds
nothing (no slot, no task, no worker slot): it waits on a timer that the ``flow_wake``
signal cuts short (the run ahead signals it from its finish step), then asks again in
a round of its own local activity, ``flow_order_turn``. With ``flow.concurrency`` too,
the slot's first admission round is made only at the run's turn (in that same step):
a later run holding the slot while an earlier one waits for it would block both.

Workflow code: deterministic, every decision from a recorded local activity.
"""

from __future__ import annotations

from dataclasses import replace

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from schemas.flow.io import OrderTurn, OrderTurnInput
    from schemas.workflow_io import PlanTasksResult, RunActivityInput
    from workers.flow.order_activities import BACKOFF_SECONDS, OrderActivities
    from workers.flow.slot import Waker
    from workers.steps import db_step


async def wait_turn(
    inp: RunActivityInput, planned: PlanTasksResult, waker: Waker
) -> PlanTasksResult:
    """The plan to run once it is the run's turn (with its slot's grant, if it asked).

    A plan at its turn (or not in a line) is returned as it is, at once."""
    place = planned.flow_order
    if place is None or place.turn:
        return planned
    # A held run's slot round is made when its activity is resumed (workers/hold.py).
    slot = None if planned.held else planned.flow_slot
    run_id = workflow.info().run_id
    delay, round_no = BACKOFF_SECONDS, 0  # start_run asked just before: wait first
    while True:
        await waker.wait(delay)
        waker.woken = False  # a wake from now on is for the next wait
        got: OrderTurn = await db_step(
            OrderActivities.flow_order_turn,
            OrderTurnInput(inp.workflow_id, round_no, slot, run_id),
        )
        if got.turn:
            return replace(planned, flow_order=replace(place, turn=True), flow_grant=got.grant)
        delay, round_no = got.retry_seconds, round_no + 1
