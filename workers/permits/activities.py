"""The permit activities: fencing tokens, bookkeeping and the permit metrics.

They run as local activities (markers in the workflow history, no server round
trip). Metrics are counted here and not in workflow code: a local activity's
result is recorded in history, so on replay it is not executed again and the
counters move once per real event. ``permit_acquired`` and ``permit_ended`` count
only when their write changed the row, so a retry after a worker crash does not
count twice.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import asyncpg
from temporalio import activity
from temporalio.exceptions import ApplicationError

from schemas.workflow_io import (
    PermitAcquiredInput,
    PermitEndedInput,
    PermitGrant,
    PermitLimits,
    PermitRoundInput,
)
from workers.permits import store
from workers.permits.metrics import PERMIT_CONFLICTS, PERMIT_LEASE_EXPIRED, PERMIT_WAIT

log = logging.getLogger(__name__)
OUTCOMES = ("released", "lease_expired")


class PermitActivities:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    def all(self) -> list[Callable[..., Any]]:
        return [self.permit_round, self.permit_acquired, self.permit_ended]

    @activity.defn(name="permit_round")
    async def permit_round(self, inp: PermitRoundInput) -> PermitLimits:
        """The resource's current limits, read before every acquire round.

        Also counts the busy slots the previous round met, so conflicts are
        visible while a task still waits, not only once it acquires.
        """
        if inp.busy:
            PERMIT_CONFLICTS.labels(resource=inp.resource).inc(inp.busy)
        found = await store.limits(self._pool, inp.resource)
        if found is None:
            raise ApplicationError(
                f"permit resource {inp.resource!r} is not declared: add it to `resources:`"
                " in the activities file and run `ingest activities apply`",
                type="UnknownPermitResource",
                non_retryable=True,
            )
        return found

    @activity.defn(name="permit_acquired")
    async def permit_acquired(self, inp: PermitAcquiredInput) -> PermitGrant:
        """Increment the slot's fencing token and record the holding permit run."""
        token, fresh = await store.record_acquire(
            self._pool, inp.resource, inp.slot, inp.permit_run_id, inp.holder, inp.lease_seconds
        )
        if fresh:
            if inp.busy:
                PERMIT_CONFLICTS.labels(resource=inp.resource).inc(inp.busy)
            PERMIT_WAIT.observe(inp.waited_seconds)
        return PermitGrant(inp.resource, inp.slot, token, inp.permit_run_id)

    @activity.defn(name="permit_ended")
    async def permit_ended(self, inp: PermitEndedInput) -> None:
        if inp.outcome not in OUTCOMES:
            raise ApplicationError(
                f"outcome must be one of {OUTCOMES}", type="InvalidInput", non_retryable=True
            )
        changed = await store.record_end(
            self._pool, inp.resource, inp.slot, inp.permit_run_id, inp.outcome
        )
        if changed and inp.outcome == "lease_expired":
            PERMIT_LEASE_EXPIRED.labels(resource=inp.resource).inc()
            log.warning(
                "permit %s/%s (run %s) lease expired before release",
                inp.resource, inp.slot, inp.permit_run_id,
            )  # fmt: skip
