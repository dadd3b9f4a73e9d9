"""Database helpers: seed activity rows the way an operator's file would (definitions.store)."""

from __future__ import annotations

import uuid
from typing import Any

import asyncpg
import orjson

from definitions import store
from schemas.definitions import ActivityDef


async def seed_activity(
    pool: asyncpg.Pool,
    event_type: str | None = None,
    *,
    tasks: list[dict[str, Any]] | None = None,
    trigger: dict[str, Any] | None = None,
    enabled: bool = True,
    activity_id: uuid.UUID | None = None,
    flow: dict[str, Any] | None = None,
) -> str:
    """Insert one activity (event-triggered on ``event_type`` unless ``trigger``, paced by
    ``flow`` when given); its id."""
    aid = activity_id or uuid.uuid4()
    act = ActivityDef.model_validate(
        {
            "id": aid,
            "name": f"test {aid}",
            "enabled": enabled,
            "trigger": trigger or {"type": "event", "event_type": event_type},
            "tasks": tasks if tasks is not None else [{"type": "noop"}],
            **({"flow": flow} if flow is not None else {}),
        }
    )
    await store.upsert(pool, [act])
    return str(aid)


def event(event_type: str, event_id: str | None = None, **data: Any) -> bytes:
    """One JSON event as a producer would publish it."""
    doc: dict[str, Any] = {"type": event_type, "source": "test", "data": data}
    if event_id is not None:
        doc["event_id"] = event_id
    return orjson.dumps(doc)


async def cron_runs(pool: asyncpg.Pool, activity_id: object) -> list[asyncpg.Record]:
    """The ``activity_runs`` rows of a cron activity, by nominal time."""
    return list(
        await pool.fetch(
            "SELECT * FROM activity_runs WHERE activity_id = $1::uuid AND trigger_kind = 'cron'"
            " ORDER BY scheduled_for",
            str(activity_id),
        )
    )


async def nominal_times(pool: asyncpg.Pool, activity_id: object) -> list[Any]:
    """The nominal times a cron activity ran, ascending."""
    return [r["scheduled_for"] for r in await cron_runs(pool, activity_id)]
