"""The one PostgreSQL call per gated run: ``flow_decide`` (migrations 0008, 0018).

It claims the workflow id in ``flow_decisions`` (a recorded decision is returned as
it was: redelivery and replay take no second slot), then, in one transaction:
singleton holder check, rate-limit GCRA, throttle GCRA, the run's cancel_on match
keys (``flow_cancel_keys``, router/flow/cancel.py), singleton holder update, and the
decision row.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

import asyncpg

from pipeline import db
from router.flow.keys import FlowKeys
from router.flow.pacing import Gcra
from schemas.workflow_io import RunActivityInput

O_START = "start"
O_SKIP = "skip"
O_CHECK = "check"  # the singleton key has a holder the router must ask Temporal about


@dataclass(frozen=True)
class Decided:
    outcome: str
    reason: str | None
    start_at: datetime | None
    cancelled: str | None
    holder: str | None
    holder_since: datetime | None
    fresh: bool  # decided by this call; False: the recorded decision, reused
    now: datetime


@dataclass(frozen=True)
class Checked:
    """A singleton holder the router asked Temporal about, and its answer."""

    holder: str
    running: bool


class FlowStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool

    async def decide(
        self, run: RunActivityInput, fk: FlowKeys, checked: Checked | None = None
    ) -> Decided:
        f = fk.flow
        rl = Gcra.rate_limit(f.rate_limit) if f.rate_limit else None
        th = Gcra.throttle(f.throttle) if f.throttle else None
        row = await self.pool.fetchrow(
            "SELECT d.*, now() AS now FROM flow_decide($1, $2, $3, $4, $5, $6, $7, $8, $9,"
            " $10, $11, $12, $13, $14, now()) AS d",
            run.workflow_id,
            uuid.UUID(run.activity_id),
            run.event_id,
            fk.key("rate_limit") if rl else None,
            rl.interval if rl else None,
            rl.tolerance if rl else None,
            fk.key("throttle") if th else None,
            th.interval if th else None,
            th.tolerance if th else None,
            fk.key("singleton") if f.singleton else None,
            f.singleton.mode if f.singleton else None,
            checked.holder if checked else None,
            checked.running if checked else None,
            list(fk.cancel_keys) if f.cancel_on else None,
        )
        assert row is not None
        return Decided(
            row["outcome"],
            row["reason"],
            row["start_at"],
            row["cancelled"],
            row["holder"],
            row["holder_since"],
            row["fresh"],
            row["now"],
        )

    async def prune(self, retention_days: float) -> int:
        """Drop decisions older than the ledger's retention (0 = keep forever): a replay
        reaching further back than that is outside the ledger's promise too.

        The cancel_on records go with them (:data:`_CANCEL_PRUNES`): a cancelling event's
        first processing time, as the ledger's entry, is kept as long as a replay is
        promised not to run twice. A run's match keys and cancel request are kept while
        its row is open (a run still waiting or running past the retention can still be
        cancelled, and names its canceller when the request reaches it)."""
        n = 0
        for delete in (_DECISIONS, *_CANCEL_PRUNES):
            n += await db.prune_older_than(self.pool, delete, retention_days)
        return n


_OLDER = "< now() - make_interval(secs => $1)"
_DECISIONS = f"DELETE FROM flow_decisions WHERE decided_at {_OLDER}"
# The run is not open: no row (never started, or cleaned away) or a finished one.
_NOT_OPEN = (
    "NOT EXISTS (SELECT 1 FROM activity_runs r WHERE r.workflow_id = {t}.workflow_id"
    " AND r.status IN ('running', 'held'))"
)
_CANCEL_PRUNES = (
    f"DELETE FROM flow_cancel_events WHERE first_at {_OLDER}",
    f"DELETE FROM flow_cancel_keys k WHERE decided_at {_OLDER} AND {_NOT_OPEN.format(t='k')}",
    f"DELETE FROM flow_cancel_requests c WHERE requested_at {_OLDER} AND {_NOT_OPEN.format(t='c')}",
)
