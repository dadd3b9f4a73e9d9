"""The concurrency columns of ``ingest flow list`` and ``GET /api/flow``: per activity and
key value, the slots in use and the runs waiting (workers/flow/slot*.py keep them).

:func:`concurrency_rows` is a listing *source* (``(conn, activity_id | None) -> rows``):
each row carries ``activity_id``, ``key`` (``""`` for a limit without a key),
``slots_in_use``, ``waiting``, and ``concurrency_limit`` and ``oldest_wait_seconds``.
Read-only SQL over ``flow_slot_keys`` (one row per resource in use: idle keys are
cleaned up, so they do not show), ``permit_slots`` and ``flow_waiters``.
"""

from __future__ import annotations

import uuid
from typing import Any, TypeAlias

import asyncpg

from schemas.flow.concurrency import WAITER_STALE_SECONDS

Conn: TypeAlias = asyncpg.Pool | asyncpg.Connection

_HELD = "s.ended_at IS NULL AND s.acquired_at + make_interval(secs => s.lease_seconds) > now()"
_LIVE = "w.seen_at > now() - make_interval(secs => $2)"
_ROWS = (
    "SELECT k.activity_id::text AS activity_id, coalesce(k.key, '') AS key, k.slot_limit,"
    " (SELECT count(*) FROM permit_slots s WHERE s.resource = k.resource AND " + _HELD + ")"
    " AS in_use,"
    " (SELECT count(*) FROM flow_waiters w WHERE w.resource = k.resource AND " + _LIVE + ")"
    " AS waiting,"
    " (SELECT extract(epoch FROM now() - min(w.arrived_at))::float8 FROM flow_waiters w"
    " WHERE w.resource = k.resource AND " + _LIVE + ") AS oldest"
    " FROM flow_slot_keys k WHERE $1::uuid IS NULL OR k.activity_id = $1"
    " ORDER BY k.activity_id, k.key NULLS FIRST"
)


async def concurrency_rows(conn: Conn, activity_id: str | None = None) -> list[dict[str, Any]]:
    """One row per (activity, key) whose concurrency resource is in use."""
    rows = await conn.fetch(
        _ROWS, uuid.UUID(activity_id) if activity_id else None, WAITER_STALE_SECONDS
    )
    return [
        {
            "activity_id": r["activity_id"],
            "key": r["key"],
            "slots_in_use": int(r["in_use"]),
            "waiting": int(r["waiting"]),
            "concurrency_limit": int(r["slot_limit"]),
            "oldest_wait_seconds": None if r["oldest"] is None else round(r["oldest"], 1),
        }
        for r in rows
    ]
