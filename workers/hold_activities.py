"""The step of a held run (:mod:`workers.hold`): is its activity still paused?

``hold_check`` is one statement: when the run's row says ``held`` and its activity is
no longer paused, the row becomes ``running`` (the run goes on to its tasks); a row an
operator's ``resume --skip-held`` marked ``skipped`` answers ``skipped``; otherwise
``held``. It is idempotent: a repeat finds the row ``running`` (or ``skipped``) and
answers the same. A resume that marks the held rows skipped and this step's flip to
``running`` both update the row, so PostgreSQL's row lock decides which one the run
gets, and both sides agree on it.

With ``flow.concurrency`` the step that resumes the run also makes the slot's first
admission round (as ``start_run`` does for a run not held), so a resumed run whose
limit is not reached holds its slot with no step of its own.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any, NamedTuple

import asyncpg
from temporalio import activity

from schemas.flow.io import FlowAcquireInput
from schemas.status import RunStatus
from schemas.workflow_io import HoldCheckInput, HoldCheckResult
from workers.flow.slot_activities import DEFAULT_LEASE_SECONDS, admission_round, granted
from workers.metrics import ACTIVITY_PAUSED, RUNS_HELD_NOW, RUNS_RELEASED

RESUMED = "resumed"

# The flip held -> running when the activity is not paused; else the row as it is. The
# outer SELECT reads the statement's snapshot, used only when nothing was updated.
_CHECK = (
    "WITH upd AS (UPDATE activity_runs SET status = 'running'"
    " WHERE run_id = $1 AND status = 'held' AND NOT EXISTS"
    " (SELECT 1 FROM activities WHERE id = $2 AND paused_at IS NOT NULL) RETURNING status)"
    " SELECT (SELECT status FROM upd) AS flipped,"
    " (SELECT status FROM activity_runs WHERE run_id = $1) AS status"
)


async def check(pool: asyncpg.Pool, run_id: str, activity_id: str) -> tuple[str, bool]:
    """('resumed' | 'held' | 'skipped', whether this call moved the row on)."""
    row = await pool.fetchrow(_CHECK, uuid.UUID(run_id), uuid.UUID(activity_id))
    if row["flipped"] is not None:
        return RESUMED, True
    status = row["status"]
    if status in (RunStatus.HELD, RunStatus.SKIPPED):
        return str(status), False
    # running (a repeat of the step that flipped it), or finished meanwhile by another
    # path: the run goes on; its steps after this one are idempotent.
    return RESUMED, False


class HoldGauges:
    """``pipeline_activity_paused`` and ``pipeline_runs_held``, refreshed from PostgreSQL
    (the worker's runs part): every activity paused or with held runs, and each one seen
    before set back to 0 when it is neither."""

    def __init__(self) -> None:
        self._known: set[str] = set()

    async def refresh(self, pool: asyncpg.Pool) -> None:
        rows = await pool.fetch(
            "SELECT a.id::text AS activity, a.paused_at IS NOT NULL AS paused,"
            " (SELECT count(*) FROM activity_runs r WHERE r.activity_id = a.id"
            " AND r.status = 'held') AS held"
            " FROM activities a WHERE a.paused_at IS NOT NULL OR EXISTS"
            " (SELECT 1 FROM activity_runs r WHERE r.activity_id = a.id AND r.status = 'held')"
        )
        now = [_Held(r["activity"], r["paused"], r["held"]) for r in rows]
        now += [_Held(a, False, 0) for a in self._known - {h.activity_id for h in now}]
        for h in now:
            ACTIVITY_PAUSED.labels(activity=h.activity_id).set(1 if h.paused else 0)
            RUNS_HELD_NOW.labels(activity=h.activity_id).set(h.held)
        self._known |= {h.activity_id for h in now}


class _Held(NamedTuple):
    """One activity's gauges: paused or not, and its held runs now."""

    activity_id: str
    paused: bool
    held: int


class HoldActivities:
    def __init__(self, pool: asyncpg.Pool, lease_seconds: float = DEFAULT_LEASE_SECONDS) -> None:
        self._pool = pool
        self._lease = lease_seconds

    def all(self) -> list[Callable[..., Any]]:
        return [self.hold_check]

    @activity.defn(name="hold_check")
    async def hold_check(self, inp: HoldCheckInput) -> HoldCheckResult:
        """Still held, resumed (with its slot's first round), or skipped."""
        state, moved = await check(self._pool, inp.run_id, inp.activity_id)
        if state != RESUMED:
            # Skipped: the run ends after this answer, so it is counted once (twice only
            # if the step is repeated after a worker crash).
            if state == RunStatus.SKIPPED:
                RUNS_RELEASED.labels(activity=inp.activity_id, outcome="skipped").inc()
            return HoldCheckResult(state)
        if moved:
            RUNS_RELEASED.labels(activity=inp.activity_id, outcome=RESUMED).inc()
        if inp.flow_slot is None:
            return HoldCheckResult(RESUMED)
        first = FlowAcquireInput(
            inp.flow_slot, inp.workflow_id, activity.info().workflow_run_id or ""
        )
        got = await admission_round(self._pool, first, self._lease)
        return HoldCheckResult(RESUMED, granted(first, got))
