"""PostgreSQL access of the scheduler: the ``activities`` table and the last cron run.

jsonb columns travel as text (no pool-wide codec), encoded/decoded here.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

import asyncpg
import orjson

from schemas.definitions import ActivityDef

_COLUMNS = "id, name, enabled, trigger, dedupe_key_strategy, tasks, created_at, updated_at"


def to_def(row: asyncpg.Record) -> ActivityDef:
    return ActivityDef.model_validate(
        {
            "id": row["id"],
            "name": row["name"],
            "enabled": row["enabled"],
            "trigger": orjson.loads(row["trigger"]),
            "dedupe_key_strategy": row["dedupe_key_strategy"],
            "tasks": orjson.loads(row["tasks"]),
        }
    )


def to_json(row: asyncpg.Record) -> dict[str, Any]:
    """A row as ``activities list --json`` prints it (dedupe_key_strategy included)."""
    return {
        "id": str(row["id"]),
        "name": row["name"],
        "enabled": row["enabled"],
        "trigger": orjson.loads(row["trigger"]),
        "dedupe_key_strategy": row["dedupe_key_strategy"],
        "tasks": orjson.loads(row["tasks"]),
        "created_at": row["created_at"].isoformat(),
        "updated_at": row["updated_at"].isoformat(),
    }


async def upsert(pool: asyncpg.Pool, defs: list[ActivityDef]) -> list[str]:
    """Insert or update every definition in one transaction; returns 'created'/'updated' each."""
    out: list[str] = []
    async with pool.acquire() as conn, conn.transaction():
        for d in defs:
            created = await conn.fetchval(
                "INSERT INTO activities (id, name, enabled, trigger, dedupe_key_strategy, tasks)"
                " VALUES ($1, $2, $3, $4::jsonb, $5, $6::jsonb)"
                " ON CONFLICT (id) DO UPDATE SET name = EXCLUDED.name,"
                " enabled = EXCLUDED.enabled, trigger = EXCLUDED.trigger,"
                " dedupe_key_strategy = EXCLUDED.dedupe_key_strategy, tasks = EXCLUDED.tasks,"
                " updated_at = now()"
                " RETURNING (xmax = 0)",
                d.id,
                d.name,
                d.enabled,
                orjson.dumps(d.trigger.model_dump(mode="json")).decode(),
                d.dedupe_key_strategy,
                orjson.dumps([t.model_dump(mode="json") for t in d.tasks]).decode(),
            )
            out.append("created" if created else "updated")
    return out


async def all_rows(pool: asyncpg.Pool) -> list[asyncpg.Record]:
    return list(await pool.fetch(f"SELECT {_COLUMNS} FROM activities ORDER BY name, id"))


async def cron_activities(pool: asyncpg.Pool) -> list[ActivityDef]:
    """Every cron activity, enabled or not (disabled ones get a paused schedule)."""
    rows = await pool.fetch(
        f"SELECT {_COLUMNS} FROM activities WHERE trigger->>'type' = 'cron' ORDER BY id"
    )
    return [to_def(r) for r in rows]


async def get(pool: asyncpg.Pool, activity_id: str) -> ActivityDef | None:
    row = await pool.fetchrow(
        f"SELECT {_COLUMNS} FROM activities WHERE id = $1", uuid.UUID(activity_id)
    )
    return to_def(row) if row is not None else None


async def last_cron_run(pool: asyncpg.Pool, activity_id: str, before: datetime) -> datetime | None:
    """The latest nominal time before ``before`` that has an ``activity_runs`` row."""
    value = await pool.fetchval(
        "SELECT max(scheduled_for) FROM activity_runs"
        " WHERE activity_id = $1 AND trigger_kind = 'cron' AND scheduled_for < $2",
        uuid.UUID(activity_id),
        before,
    )
    return value if isinstance(value, datetime) else None


async def run_logged(pool: asyncpg.Pool, workflow_id: str) -> bool:
    """True when ``activity_runs`` already holds this run (kept past Temporal's retention)."""
    return bool(
        await pool.fetchval("SELECT true FROM activity_runs WHERE workflow_id = $1", workflow_id)
    )
