"""Permits as a worker part (see ``workers.parts``).

Registers ``PermitSlotWorkflow`` and the permit local activities on the worker's
task queue (TaskInstanceWorkflow starts permits as children on the same queue),
and refreshes ``pipeline_permits_held`` / ``pipeline_permit_capacity`` from
PostgreSQL every few seconds, outside the workflow sandbox. The gauges come from
the shared table, so every worker reports the same value: aggregate with
``max by (resource)``, never ``sum``.
"""

from __future__ import annotations

import asyncpg

from pipeline.metrics import start_at_zero
from workers.parts import PartDeps, WorkerPart, gauge_refresher
from workers.permits import store
from workers.permits.activities import PermitActivities
from workers.permits.metrics import (
    PERMIT_CAPACITY,
    PERMIT_CONFLICTS,
    PERMIT_LEASE_EXPIRED,
    PERMITS_HELD,
)
from workers.permits.workflow import PermitSlotWorkflow


async def refresh_gauges(pool: asyncpg.Pool) -> None:
    for resource, capacity, held in await store.held_counts(pool):
        PERMIT_CAPACITY.labels(resource=resource).set(capacity)
        PERMITS_HELD.labels(resource=resource).set(held)
        # Resources are data: their counters start at 0 once the worker knows them.
        start_at_zero(PERMIT_CONFLICTS, resource=[resource])
        start_at_zero(PERMIT_LEASE_EXPIRED, resource=[resource])


def permit_part(deps: PartDeps) -> WorkerPart:
    """``PermitSlotWorkflow``, the fencing-token activities and the held-permits gauges."""

    acts = PermitActivities(deps.pool)
    return WorkerPart(
        "permits",
        (PermitSlotWorkflow,),
        acts.all(),
        (gauge_refresher("permit", refresh_gauges, deps.pool),),
    )
