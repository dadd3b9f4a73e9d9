"""The local activities of flow concurrency: admit-and-acquire a run's slot (or queue
it), release it and name the runs to wake; and the flow metrics.

Like the permit activities, they count (workflow code cannot: a replay would count
again) and their results are recorded in history, so a replay asks nothing twice.
Both are idempotent per holder (a retry after a worker crash gets the same grant, or
ends nothing twice): ``flow_store`` decides everything under the resource's lock.

A holder that an operator terminated runs no release. When the first run in the queue
is refused (every slot held), the activity asks Temporal about the oldest holders (held for
:data:`HOLDER_CHECK_AFTER_SECONDS` or more): a holder that is no longer running has
its row ended (outcome ``holder_closed``) and the round is decided again. Temporal is
the truth, the row the hint; the lease stays the backstop when Temporal cannot answer.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import asyncpg
from temporalio import activity
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from schemas.flow.concurrency import WAITER_STALE_SECONDS
from schemas.flow.io import FlowAcquired, FlowAcquireInput, FlowWake
from schemas.workflow_io import FlowReleaseInput, FlowSlot, PermitGrant
from workers.flow import slot_store as flow_store
from workers.flow.metrics import FLOW_WAIT
from workers.permits.semaphore import backoff_delay

log = logging.getLogger(__name__)

# A waiting run asks again at least every MAX_BACKOFF (a release also wakes it by
# signal); one not seen for WAITER_STALE_SECONDS (4 of those) no longer counts.
BACKOFF_SECONDS = 2.0
MAX_BACKOFF_SECONDS = 30.0
STALE_SECONDS = WAITER_STALE_SECONDS
DEFAULT_LEASE_SECONDS = 3600.0
# A refused round checks at most this many of the oldest holders, each held this long.
HOLDER_CHECKS = 3
HOLDER_CHECK_AFTER_SECONDS = 10.0
HOLDER_CLOSED = "holder_closed"


async def admission_round(
    pool: asyncpg.Pool, inp: FlowAcquireInput, lease_seconds: float
) -> flow_store.Round:
    """One admit-and-acquire round (``flow_acquire``'s, and ``start_run``'s first)."""
    return await flow_store.acquire(
        pool, inp.slot, inp.holder, inp.holder_run_id, lease_seconds, STALE_SECONDS
    )


def granted(inp: FlowAcquireInput, got: flow_store.Round) -> PermitGrant | None:
    """The grant a round decided (None: queued), its wait observed once per grant."""
    if got.slot is None:
        return None
    assert got.token is not None
    if got.fresh:
        FLOW_WAIT.labels(activity=inp.slot.activity_id).observe(got.waited_seconds)
    return PermitGrant(inp.slot.resource, got.slot, got.token, inp.holder_run_id)


async def release(pool: asyncpg.Pool, inp: FlowReleaseInput) -> FlowWake:
    """``inp.holder`` leaves its slot or the queue: the other runs whose turn it is now."""
    wake = await flow_store.release(pool, inp.slot, inp.holder, STALE_SECONDS)
    return FlowWake([w for w in wake if w != inp.holder])


class FlowActivities:
    def __init__(
        self,
        pool: asyncpg.Pool,
        client: Client | None = None,
        lease_seconds: float = DEFAULT_LEASE_SECONDS,
    ) -> None:
        self._pool = pool
        self._client = client  # None: no holder checks (the lease alone frees a dead one)
        self._lease = lease_seconds

    def all(self) -> list[Callable[..., Any]]:
        return [self.flow_acquire, self.flow_release]

    @activity.defn(name="flow_acquire")
    async def flow_acquire(self, inp: FlowAcquireInput) -> FlowAcquired:
        got = await admission_round(self._pool, inp, self._lease)
        # Only the head of the queue checks the holders: a bounded cost per resource.
        if got.slot is None and got.ahead == 0 and await self._freed_closed_holders(inp.slot):
            got = await admission_round(self._pool, inp, self._lease)
        grant = granted(inp, got)
        if grant is None:
            retry = backoff_delay(inp.round_no, BACKOFF_SECONDS, MAX_BACKOFF_SECONDS)
            return FlowAcquired(None, retry)
        return FlowAcquired(grant)

    async def _freed_closed_holders(self, slot: FlowSlot) -> bool:
        """End the rows of the oldest holders Temporal reports closed: True if any."""
        if self._client is None:
            return False
        freed = False
        held = await flow_store.oldest_holders(
            self._pool, slot.resource, HOLDER_CHECK_AFTER_SECONDS, HOLDER_CHECKS
        )
        for h in held:
            if await self._running(h.holder):
                continue
            if await flow_store.end_slot(self._pool, slot.resource, h, HOLDER_CLOSED):
                log.warning(
                    "flow slot %s:%s freed: its holder %s is closed and never released it",
                    slot.resource, h.slot, h.holder,
                )  # fmt: skip
                freed = True
        return freed

    async def _running(self, workflow_id: str) -> bool:
        """False only when Temporal says the holder is closed (or gone past retention)."""
        assert self._client is not None
        try:
            desc = await self._client.get_workflow_handle(workflow_id).describe()
        except RPCError as exc:
            if exc.status == RPCStatusCode.NOT_FOUND:
                return False  # it held a slot, so it started: closed and past retention
            log.info("flow holder %s not checked: %s", workflow_id, exc.message)
            return True  # no answer: keep the slot held (the lease is the backstop)
        return desc.status == WorkflowExecutionStatus.RUNNING

    @activity.defn(name="flow_release")
    async def flow_release(self, inp: FlowReleaseInput) -> FlowWake:
        return await release(self._pool, inp)
