"""Test handlers that record when they are inside their permit, in PostgreSQL.

``visits`` rows (task, attempt, worker, slot, token, entered_at, exited_at) come
from the database's own clock, so intervals from several processes compare.
The module is importable by a worker subprocess (INGEST_TASK_HANDLERS), where the
pool comes from ``DATABASE_URL``.
"""

from __future__ import annotations

import asyncio
import os
from datetime import datetime

import asyncpg

from workers.handlers import TaskContext, register

VISITS_DDL = (
    "CREATE TABLE IF NOT EXISTS visits (id bigserial PRIMARY KEY, task_id text NOT NULL,"
    " attempt int NOT NULL, worker text NOT NULL, slot text, token bigint,"
    " entered_at timestamptz NOT NULL DEFAULT clock_timestamp(), exited_at timestamptz)"
)


async def visit(pool: asyncpg.Pool, ctx: TaskContext, worker: str = "test") -> None:
    """Record entering, hold ``config.hold_seconds``, record leaving."""
    assert ctx.permit is not None, "a permit task ran without ctx.permit"
    vid = await pool.fetchval(
        "INSERT INTO visits (task_id, attempt, worker, slot, token) VALUES ($1, $2, $3, $4, $5)"
        " RETURNING id",
        ctx.task_id, ctx.attempt, worker, ctx.permit.slot, ctx.permit.token,
    )  # fmt: skip
    await asyncio.sleep(float(ctx.config.get("hold_seconds", 0.3)))
    await pool.execute("UPDATE visits SET exited_at = clock_timestamp() WHERE id = $1", vid)


_pool: asyncpg.Pool | None = None


async def env_pool() -> asyncpg.Pool:
    """The pool of a worker subprocess's test handlers, from ``DATABASE_URL`` (made once)."""
    global _pool
    if _pool is None:
        _pool = await asyncpg.create_pool(os.environ["DATABASE_URL"], min_size=1, max_size=4)
    return _pool


@register("visit")
async def visit_from_env(ctx: TaskContext) -> None:
    """``visit`` for a worker subprocess: DATABASE_URL and PERMIT_TEST_WORKER from the env."""
    await visit(await env_pool(), ctx, os.environ.get("PERMIT_TEST_WORKER", "?"))


def max_inside(intervals: list[tuple[datetime, datetime]]) -> int:
    """The most intervals open at one instant (an exit at t comes before an entry at t)."""
    events = sorted([(a, 1) for a, _ in intervals] + [(b, -1) for _, b in intervals])
    inside = best = 0
    for _, step in events:
        inside += step
        best = max(best, inside)
    return best
