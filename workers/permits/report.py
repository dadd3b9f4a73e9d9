"""What an operator sees of the permits: ``ingest permits list`` and ``GET /api/permits``.

Each acquired slot from ``permit_slots`` (holder task, fencing token, age against
the lease), with Temporal asked whether the slot's permit run is still open, so a
holder killed without releasing shows as ``closed (not released)``, not ``held``.
"""

from __future__ import annotations

from typing import Any

import asyncpg

from schemas.ids import permit_workflow_id
from workers.permits import store


async def temporal_state(client: Any, workflow_id: str, run_id: str) -> str:
    """'running' when ``run_id`` is the open run of ``workflow_id``, else 'closed'."""
    from temporalio.client import WorkflowExecutionStatus
    from temporalio.service import RPCError

    try:
        desc = await client.get_workflow_handle(workflow_id, run_id=run_id).describe()
    except RPCError:
        return "unknown"
    return "running" if desc.status == WorkflowExecutionStatus.RUNNING else "closed"


async def permit_rows(
    pool: asyncpg.Pool, client: Any, resource: str | None
) -> list[dict[str, Any]]:
    """One JSON-friendly row per acquired slot of ``resource`` (all resources when None)."""
    out: list[dict[str, Any]] = []
    for r in await store.slots(pool, resource):
        wf_id = permit_workflow_id(r.resource, r.slot)
        temporal = await temporal_state(client, wf_id, r.run_id) if r.ended_at is None else "closed"
        state = r.outcome or ("held" if temporal == "running" else f"{temporal} (not released)")
        out.append(
            {
                "resource": r.resource,
                "slot": r.slot,
                "capacity": r.capacity,
                "state": state,
                "holder": r.holder,
                "token": r.token,
                "permit_run_id": r.run_id,
                "acquired_at": r.acquired_at.isoformat(),
                "age_seconds": round(r.age_seconds, 1),
                "lease_seconds": r.lease_seconds,
            }
        )
    return out
