"""The ops service's reads of PostgreSQL: runs, tasks, the fix audit, the gauges.

Rows come back as JSON-ready dicts (uuids and times as strings, jsonb parsed;
jsonb columns travel as text, there is no pool-wide codec).
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

import asyncpg
import orjson

from schemas.status import TaskStatus

TASK_STATUSES: tuple[str, ...] = tuple(TaskStatus)
_JSON = ("payload", "patch", "task_counts")

_RUN_COLUMNS = (
    "r.run_id, r.activity_id, a.name AS activity_name, r.workflow_id, r.trigger_kind,"
    " r.event_id, r.scheduled_for, r.status, r.ended_by, r.started_at, r.finished_at,"
    " r.trace_id"
)
_TASK_COLUMNS = (
    "t.id AS task_id, t.run_id, r.activity_id, r.workflow_id AS run_workflow_id, t.task_type,"
    " t.index, t.status, t.attempts, t.last_error, t.payload, t.duplicate_of, t.created_at,"
    " t.updated_at"
)
_TASKS_FROM = "task_instances t JOIN activity_runs r ON r.run_id = t.run_id"


def jsonable(row: asyncpg.Record) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in row.items():
        if isinstance(value, uuid.UUID):
            value = str(value)
        elif isinstance(value, datetime):
            value = value.isoformat()
        elif key in _JSON and isinstance(value, str):
            value = orjson.loads(value)
        out[key] = value
    return out


async def list_runs(
    pool: asyncpg.Pool,
    activity: uuid.UUID | None,
    status: str | None,
    since: datetime | None,
    limit: int,
) -> list[dict[str, Any]]:
    rows = await pool.fetch(
        f"SELECT {_RUN_COLUMNS}, c.task_counts FROM activity_runs r"
        " LEFT JOIN activities a ON a.id = r.activity_id"
        " LEFT JOIN LATERAL (SELECT jsonb_object_agg(status, n)::text AS task_counts FROM"
        "  (SELECT status, count(*) AS n FROM task_instances t WHERE t.run_id = r.run_id"
        "   GROUP BY status) s) c ON true"
        " WHERE ($1::uuid IS NULL OR r.activity_id = $1)"
        " AND ($2::text IS NULL OR r.status = $2)"
        " AND ($3::timestamptz IS NULL OR r.started_at >= $3)"
        " ORDER BY r.started_at DESC LIMIT $4",
        activity,
        status,
        since,
        limit,
    )
    return [jsonable(r) for r in rows]


async def get_run(pool: asyncpg.Pool, run_id: uuid.UUID) -> dict[str, Any] | None:
    row = await pool.fetchrow(
        f"SELECT {_RUN_COLUMNS} FROM activity_runs r"
        " LEFT JOIN activities a ON a.id = r.activity_id WHERE r.run_id = $1",
        run_id,
    )
    return None if row is None else jsonable(row)


async def run_tasks(pool: asyncpg.Pool, run_id: uuid.UUID) -> list[dict[str, Any]]:
    rows = await pool.fetch(
        f"SELECT {_TASK_COLUMNS} FROM {_TASKS_FROM} WHERE t.run_id = $1 ORDER BY t.index", run_id
    )
    return [jsonable(r) for r in rows]


async def tasks_by_id(pool: asyncpg.Pool, ids: list[str]) -> dict[str, dict[str, Any]]:
    rows = await pool.fetch(f"SELECT {_TASK_COLUMNS} FROM {_TASKS_FROM} WHERE t.id = ANY($1)", ids)
    return {r["task_id"]: jsonable(r) for r in rows}


async def get_task(pool: asyncpg.Pool, task_id: str) -> dict[str, Any] | None:
    return (await tasks_by_id(pool, [task_id])).get(task_id)


async def list_tasks(
    pool: asyncpg.Pool,
    status: str,
    task_type: str | None,
    activity: uuid.UUID | None,
    limit: int,
) -> list[dict[str, Any]]:
    rows = await pool.fetch(
        f"SELECT {_TASK_COLUMNS} FROM {_TASKS_FROM} WHERE t.status = $1"
        " AND ($2::text IS NULL OR t.task_type = $2)"
        " AND ($3::uuid IS NULL OR r.activity_id = $3)"
        " ORDER BY t.updated_at DESC LIMIT $4",
        status,
        task_type,
        activity,
        limit,
    )
    return [jsonable(r) for r in rows]


async def fixes(pool: asyncpg.Pool, *, task_id: str | None = None,
                run_id: uuid.UUID | None = None) -> list[dict[str, Any]]:  # fmt: skip
    rows = await pool.fetch(
        "SELECT task_id, seq, run_id, task_type, action, patch, error, actor, note, created_at"
        " FROM task_fixes WHERE ($1::text IS NULL OR task_id = $1)"
        " AND ($2::uuid IS NULL OR run_id = $2) ORDER BY created_at, task_id, seq",
        task_id,
        run_id,
    )
    return [jsonable(r) for r in rows]


async def pending_fix_summary(pool: asyncpg.Pool) -> list[tuple[str, str, int, float]]:
    """(activity id, task type, tasks pending_fix, age in seconds of the oldest)."""
    rows = await pool.fetch(
        f"SELECT r.activity_id, t.task_type, count(*) AS n,"
        f" extract(epoch FROM now() - min(t.updated_at))::float8 AS oldest"
        f" FROM {_TASKS_FROM} WHERE t.status = 'pending_fix' GROUP BY 1, 2"
    )
    return [(str(r["activity_id"]), r["task_type"], r["n"], r["oldest"]) for r in rows]
