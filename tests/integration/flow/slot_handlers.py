"""A handler that records when a run is inside its task, for the flow concurrency tests.

``flow_visits`` rows (run, key, priority, worker, attempt, entered_at, exited_at) use the
database's clock, so intervals from several processes compare. ``data.hold`` (seconds)
is how long the handler stays inside; ``data.gate`` names a ``flow_gates`` row it
waits for (open = true) before leaving; ``data.fail`` fails the task once it left.
Importable by a worker subprocess (INGEST_TASK_HANDLERS), where the pool comes from
``DATABASE_URL``.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from typing import Any

import asyncpg

from schemas.definitions import ActivityDef, EventTrigger, TaskDef
from schemas.flow.spec import FlowDef
from tests.integration.permits.handlers import env_pool
from tests.support.wait import wait_until
from workers.handlers import PermanentTaskError, TaskContext, register

FLOW_VISITS_DDL = (
    "CREATE TABLE IF NOT EXISTS flow_visits (id bigserial PRIMARY KEY, run_id text NOT NULL,"
    " key text, priority int, worker text NOT NULL, attempt int NOT NULL,"
    " entered_at timestamptz NOT NULL DEFAULT clock_timestamp(), exited_at timestamptz);"
    " CREATE TABLE IF NOT EXISTS flow_gates (name text PRIMARY KEY, open boolean NOT NULL)"
)


async def flow_visit(pool: asyncpg.Pool, ctx: TaskContext, worker: str = "test") -> None:
    data: dict[str, Any] = (ctx.payload.get("event") or {}).get("data") or {}
    vid = await pool.fetchval(
        "INSERT INTO flow_visits (run_id, key, priority, worker, attempt)"
        " VALUES ($1, $2, $3, $4, $5) RETURNING id",
        ctx.run_id, data.get("k"), data.get("p"), worker, ctx.attempt,
    )  # fmt: skip
    await asyncio.sleep(float(data.get("hold", 0.2)))
    gate = data.get("gate")
    if gate:
        assert await wait_until(lambda: _gate_open(pool, gate), 300, 0.1), f"gate {gate} shut"
    await pool.execute("UPDATE flow_visits SET exited_at = clock_timestamp() WHERE id = $1", vid)
    if data.get("fail"):
        raise PermanentTaskError("told to fail")


async def _gate_open(pool: asyncpg.Pool, gate: str) -> bool:
    """The gate row another process opens (a database row: no in-process event to await)."""
    return bool(await pool.fetchval("SELECT open FROM flow_gates WHERE name = $1", gate))


@register("flow_visit")
async def flow_visit_from_env(ctx: TaskContext) -> None:
    """``flow_visit`` for a worker subprocess: DATABASE_URL and FLOW_TEST_WORKER from the env."""
    await flow_visit(await env_pool(), ctx, os.environ.get("FLOW_TEST_WORKER", "?"))


async def insert_flow_activity(pool: asyncpg.Pool, flow: dict[str, Any], **task: Any) -> str:
    """Store an activity with one ``flow_visit`` task and this ``flow`` block."""
    from definitions import store

    activity_id = str(uuid.uuid4())
    act = ActivityDef.model_construct(
        id=uuid.UUID(activity_id),
        name=f"flow-{activity_id[:8]}",
        trigger=EventTrigger(type="event", event_type="test.event"),
        tasks=[TaskDef.model_construct(type="flow_visit", **task)],
        flow=FlowDef.model_validate(flow),
    )
    await store.upsert(pool, [act])
    return activity_id
