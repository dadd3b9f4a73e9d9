"""The local activities of flow concurrency: queue a waiting run, record its slot, wake
the next ones; and the flow metrics.

Like the permit activities, they count (workflow code cannot: a replay would count
again) and their results are recorded in history, so a replay asks nothing twice.
``flow_round`` answers with the limits of the slot's resource: ``admit`` is whether
this run's turn has come (held slots + live waiters ahead of it < limit), so runs
start in (priority, arrival) order; the permit child start stays the lock.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import asyncpg
from temporalio import activity

from pipeline.metrics import FLOW_WAIT
from schemas.flow_concurrency import WAITER_STALE_SECONDS
from schemas.workflow_io import (
    FlowAcquiredInput,
    FlowReleasedInput,
    FlowRoundInput,
    FlowWake,
    PermitGrant,
    PermitLimits,
)
from workers.permits import flow_store

# A waiting run asks again at least every MAX_BACKOFF (a release also wakes it by
# signal); one not seen for WAITER_STALE_SECONDS (4 of those) no longer counts.
BACKOFF_SECONDS = 2.0
MAX_BACKOFF_SECONDS = 30.0
STALE_SECONDS = WAITER_STALE_SECONDS
DEFAULT_LEASE_SECONDS = 3600.0


class FlowActivities:
    def __init__(self, pool: asyncpg.Pool, lease_seconds: float = DEFAULT_LEASE_SECONDS) -> None:
        self._pool = pool
        self._lease = lease_seconds

    def all(self) -> list[Callable[..., Any]]:
        return [self.flow_round, self.flow_acquired, self.flow_released]

    @activity.defn(name="flow_round")
    async def flow_round(self, inp: FlowRoundInput) -> PermitLimits:
        held, ahead = await flow_store.queue_round(self._pool, inp.slot, inp.holder, STALE_SECONDS)
        return PermitLimits(
            capacity=inp.slot.limit,
            lease_seconds=self._lease,
            backoff_seconds=BACKOFF_SECONDS,
            max_backoff_seconds=MAX_BACKOFF_SECONDS,
            admit=held + ahead < inp.slot.limit,
        )

    @activity.defn(name="flow_acquired")
    async def flow_acquired(self, inp: FlowAcquiredInput) -> PermitGrant:
        token, fresh = await flow_store.record_acquired(
            self._pool,
            inp.slot,
            inp.holder,
            inp.permit_slot,
            inp.permit_run_id,
            inp.lease_seconds,
        )
        if fresh:
            FLOW_WAIT.labels(activity=inp.slot.activity_id).observe(inp.waited_seconds)
        return PermitGrant(inp.slot.resource, inp.permit_slot, token, inp.permit_run_id)

    @activity.defn(name="flow_released")
    async def flow_released(self, inp: FlowReleasedInput) -> FlowWake:
        wake = await flow_store.after_release(self._pool, inp.slot, inp.holder, STALE_SECONDS)
        return FlowWake([w for w in wake if w != inp.holder])
