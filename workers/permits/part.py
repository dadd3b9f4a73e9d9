"""Permits as a worker part (see ``workers.parts``).

Registers ``PermitSlotWorkflow`` and the permit local activities on the worker's
task queue (TaskInstanceWorkflow starts permits as children on the same queue),
and refreshes ``pipeline_permits_held`` / ``pipeline_permit_capacity`` from
PostgreSQL every few seconds, outside the workflow sandbox. The gauges come from
the shared table, so every worker reports the same value: aggregate with
``max by (resource)``, never ``sum``.
"""

from __future__ import annotations

import asyncio
import logging

import asyncpg

from pipeline.metrics import (
    FLOW_OLDEST_WAIT,
    FLOW_RUNS_WAITING,
    FLOW_SLOTS_IN_USE,
    PERMIT_CAPACITY,
    PERMIT_CONFLICTS,
    PERMIT_LEASE_EXPIRED,
    PERMITS_HELD,
    start_at_zero,
)
from workers.parts import PartDeps, WorkerPart
from workers.permits import flow_store, store
from workers.permits.activities import PermitActivities
from workers.permits.flow_activities import STALE_SECONDS, FlowActivities
from workers.permits.workflow import PermitSlotWorkflow

log = logging.getLogger(__name__)
REFRESH_SECONDS = 5.0


async def refresh_gauges(pool: asyncpg.Pool) -> None:
    for resource, capacity, held in await store.held_counts(pool):
        PERMIT_CAPACITY.labels(resource=resource).set(capacity)
        PERMITS_HELD.labels(resource=resource).set(held)
        # Resources are data: their counters start at 0 once the worker knows them.
        start_at_zero(PERMIT_CONFLICTS, resource=[resource])
        start_at_zero(PERMIT_LEASE_EXPIRED, resource=[resource])


async def refresh_flow_gauges(pool: asyncpg.Pool) -> None:
    """Per activity with flow.concurrency: slots in use, runs waiting, the oldest wait
    (every such activity, at 0 when idle; keys are left to ``ingest flow list``)."""
    for use in await flow_store.activity_use(pool, STALE_SECONDS):
        FLOW_SLOTS_IN_USE.labels(activity=use.activity_id).set(use.in_use)
        FLOW_RUNS_WAITING.labels(activity=use.activity_id).set(use.waiting)
        FLOW_OLDEST_WAIT.labels(activity=use.activity_id).set(use.oldest_wait_seconds)


def permit_part(deps: PartDeps) -> WorkerPart:
    """``PermitSlotWorkflow``, the fencing-token and flow-concurrency activities, and the
    held-permits and flow gauges. Runs of an activity with ``flow.concurrency`` need it."""

    async def refresher() -> None:
        while True:
            for what, refresh in (("permit", refresh_gauges), ("flow", refresh_flow_gauges)):
                try:
                    await refresh(deps.pool)
                except (asyncpg.PostgresError, OSError) as exc:
                    log.warning("%s gauges not refreshed: %s", what, exc)
            await asyncio.sleep(REFRESH_SECONDS)

    acts = PermitActivities(deps.pool)
    flow = FlowActivities(deps.pool, deps.client, deps.worker_settings.flow_slot_lease_seconds)
    return WorkerPart("permits", (PermitSlotWorkflow,), [*acts.all(), *flow.all()], (refresher,))
