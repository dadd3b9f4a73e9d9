"""PostgreSQL access of the scheduler: the last cron run of an activity, and logged runs.

Activity definitions themselves are read through :mod:`definitions.store`.
"""

from __future__ import annotations

import uuid
from datetime import datetime

import asyncpg


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
