"""Skipped triggers: the reasons, and reading the durable record (``flow_decisions``).

A trigger ``rate_limit`` or ``singleton`` skips is recorded once, by workflow id, in
the same call that decided it (``flow_decide``, migration 0008); a replay finds the
record and skips it again. The CLI (``ingest flow list``) and the ops API
(``GET /flow/skips``) read it here.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

import asyncpg

from schemas.flow.controls import SKIP_REASONS

__all__ = ["SKIP_REASONS", "Skip", "recent_skips"]


@dataclass(frozen=True)
class Skip:
    workflow_id: str
    activity_id: str
    key: str
    reason: str
    event_id: str | None
    at: datetime


async def recent_skips(
    conn: asyncpg.Pool | asyncpg.Connection, activity_id: str | None = None, limit: int = 50
) -> list[Skip]:
    """The latest skips, newest first (of one activity when ``activity_id`` is given)."""
    rows = await conn.fetch(
        "SELECT workflow_id, activity_id::text AS activity_id, coalesce(key, '') AS key, reason,"
        " event_id, decided_at FROM flow_decisions WHERE outcome = 'skip'"
        " AND ($1::uuid IS NULL OR activity_id = $1::uuid) ORDER BY decided_at DESC LIMIT $2",
        uuid.UUID(activity_id) if activity_id else None,
        limit,
    )
    return [
        Skip(
            r["workflow_id"],
            r["activity_id"],
            r["key"],
            r["reason"],
            r["event_id"],
            r["decided_at"],
        )
        for r in rows
    ]
