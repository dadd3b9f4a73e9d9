"""Activities with a debounce or batch flow, and what their windows hold (flow_windows)."""

from __future__ import annotations

import uuid
from typing import Any

import asyncpg

from definitions import store
from schemas.definitions import ActivityDef


async def seed_flow_activity(
    pool: asyncpg.Pool,
    event_type: str,
    flow: dict[str, Any],
    tasks: list[dict[str, Any]] | None = None,
) -> str:
    aid = uuid.uuid4()
    act = ActivityDef.model_validate(
        {
            "id": aid,
            "name": f"test {aid}",
            "trigger": {"type": "event", "event_type": event_type},
            "tasks": tasks if tasks is not None else [{"type": "noop"}],
            "flow": flow,
        }
    )
    await store.upsert(pool, [act])
    return str(aid)


async def windows(pool: asyncpg.Pool, activity_id: str) -> list[dict[str, Any]]:
    """Every window of the activity, oldest first, with its members in their order."""
    rows = await pool.fetch(
        "SELECT w.id, w.kind, w.key, w.state, w.size, w.closed_by, w.run_workflow_id,"
        " array_agg(m.event_id ORDER BY m.position) AS members"
        " FROM flow_windows w JOIN flow_members m ON m.window_id = w.id"
        " WHERE w.activity_id = $1::uuid GROUP BY w.id ORDER BY w.id",
        activity_id,
    )
    return [dict(r) for r in rows]


async def started(pool: asyncpg.Pool, activity_id: str) -> int:
    return int(
        await pool.fetchval(
            "SELECT count(*) FROM flow_windows WHERE activity_id = $1::uuid AND state = 'started'",
            activity_id,
        )
    )


async def runs(pool: asyncpg.Pool, activity_id: str) -> list[asyncpg.Record]:
    return list(
        await pool.fetch(
            "SELECT workflow_id, event_id, status FROM activity_runs WHERE activity_id = $1::uuid",
            activity_id,
        )
    )


async def window_workflow_closed(client: Any, activity_id: str, key: str) -> None:
    """Wait until the key's window workflow has ended (it ends once no window is left),
    so a test leaves nothing running on the shared server."""
    from temporalio.client import WorkflowExecutionStatus

    from schemas import ids
    from tests.support.wait import eventually

    handle = client.get_workflow_handle(ids.window_workflow_id(activity_id, key))

    async def closed() -> bool:
        return (await handle.describe()).status != WorkflowExecutionStatus.RUNNING

    await eventually(closed, 30, f"the window workflow of {key!r} to end")
