"""``pipeline_flow_runs_ended_total`` at 0 for every activity that can end runs early.

The counter is incremented by whichever worker runs a run's ``end_run`` step, and an
alert reads ``increase()`` of it (``IngestFlowRunsTimingOut``): a series that first
appears at 1 has an increase of 0 and would never fire (see :mod:`pipeline.metrics`).
So every worker creates, with the flow gauges' refresh, the series of every activity
whose ``flow`` block declares ``timeouts``, ``cancel_on`` or a ``singleton`` (whose
``mode: cancel`` ends the run it replaces), one per cause: an activity applied after the
worker started gets its series within one refresh, before a run of it can time out.
"""

from __future__ import annotations

from dataclasses import dataclass

import asyncpg

from pipeline.metrics import start_at_zero
from workers.flow.metrics import CAUSES, FLOW_RUNS_ENDED

_ENDING = (
    "SELECT id::text AS activity_id FROM activities"
    " WHERE flow ?| ARRAY['timeouts', 'cancel_on', 'singleton'] ORDER BY id"
)


@dataclass(frozen=True)
class Ending:
    activity_id: str  # an activity whose flow block can end its runs early


async def ended_at_zero(pool: asyncpg.Pool) -> list[Ending]:
    """Create the series (idempotent: one that exists keeps its value); the activities."""
    ending = [Ending(r["activity_id"]) for r in await pool.fetch(_ENDING)]
    for e in ending:
        start_at_zero(FLOW_RUNS_ENDED, activity=[e.activity_id], cause=CAUSES)
    return ending
