"""The ``activities`` table: upsert, list and read activity definitions.

The one writer of activity rows: ``ingest activities apply``, ``ingest run
--seed-demo``, the tests and the benchmarks all go through :func:`upsert`.
jsonb columns travel as text (no pool-wide codec), encoded/decoded here.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

import asyncpg
import orjson

from schemas.definitions import ActivityDef

_COLUMNS = "id, name, enabled, trigger, dedupe_key_strategy, tasks, flow, created_at, updated_at"


def _document(row: asyncpg.Record) -> dict[str, Any]:
    """A row as its definition document (the JSON columns decoded)."""
    return {
        "id": row["id"],
        "name": row["name"],
        "enabled": row["enabled"],
        "trigger": orjson.loads(row["trigger"]),
        "dedupe_key_strategy": row["dedupe_key_strategy"],
        "tasks": orjson.loads(row["tasks"]),
        "flow": orjson.loads(row["flow"]) if row["flow"] is not None else None,
    }


def to_def(row: asyncpg.Record) -> ActivityDef:
    return ActivityDef.model_validate(_document(row))


def to_json(row: asyncpg.Record) -> dict[str, Any]:
    """A row as ``activities list --json`` prints it (dedupe_key_strategy included)."""
    return {
        **_document(row),
        "id": str(row["id"]),
        "created_at": row["created_at"].isoformat(),
        "updated_at": row["updated_at"].isoformat(),
    }


_INSERT = (
    "INSERT INTO activities (id, name, enabled, trigger, dedupe_key_strategy, tasks, flow)"
    " VALUES ($1, $2, $3, $4::jsonb, $5, $6::jsonb, $7::jsonb)"
)
_UPSERT = (
    f"{_INSERT} ON CONFLICT (id) DO UPDATE SET name = EXCLUDED.name,"
    " enabled = EXCLUDED.enabled, trigger = EXCLUDED.trigger,"
    " dedupe_key_strategy = EXCLUDED.dedupe_key_strategy, tasks = EXCLUDED.tasks,"
    " flow = EXCLUDED.flow, updated_at = now()"
    " RETURNING (xmax = 0)"
)
_INSERT_NEW = f"{_INSERT} ON CONFLICT (id) DO NOTHING RETURNING true"


async def upsert(
    pool: asyncpg.Pool, defs: Sequence[ActivityDef], *, keep_existing: bool = False
) -> list[str]:
    """Insert or update every definition in one transaction; returns 'created'/'updated' each.

    ``keep_existing``: an activity already stored is left as it is ('kept'), as
    ``ingest run --seed-demo`` wants (an operator's edit of a demo activity stays).
    """
    out: list[str] = []
    sql = _INSERT_NEW if keep_existing else _UPSERT
    async with pool.acquire() as conn, conn.transaction():
        for d in defs:
            created = await conn.fetchval(
                sql,
                d.id,
                d.name,
                d.enabled,
                orjson.dumps(d.trigger.model_dump(mode="json")).decode(),
                d.dedupe_key_strategy,
                orjson.dumps([t.model_dump(mode="json") for t in d.tasks]).decode(),
                _flow_json(d),
            )
            out.append("created" if created else "kept" if keep_existing else "updated")
    return out


def _flow_json(d: ActivityDef) -> str | None:
    if d.flow is None:
        return None
    return orjson.dumps(d.flow.model_dump(mode="json", exclude_none=True)).decode()


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


async def paused_ids(pool: asyncpg.Pool) -> set[str]:
    """The ids of the activities paused now (``ingest activities pause``,
    :mod:`definitions.pause`)."""
    rows = await pool.fetch("SELECT id::text FROM activities WHERE paused_at IS NOT NULL")
    return {r[0] for r in rows}
