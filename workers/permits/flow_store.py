"""PostgreSQL side of flow concurrency: the wait queue and the per-key resources.

A slot is held while its ``permit_slots`` row is (same rule as task permits:
``store.HELD``). ``flow_waiters`` orders the runs waiting for a resource by
(priority, seq); a waiter counts while it was seen within ``stale_seconds`` (every
round refreshes it). ``flow_slot_keys`` names the activity and key value behind a
resource; it and the resource's ended slot rows go when the resource is idle.
"""

from __future__ import annotations

from dataclasses import dataclass

import asyncpg

from schemas.workflow_io import FlowSlot
from workers.permits.store import HELD, RECORD_ACQUIRE

_LIVE = "w.seen_at > now() - make_interval(secs => $2)"

_ROUND = (
    "WITH k AS (INSERT INTO flow_slot_keys (resource, activity_id, key, slot_limit)"
    " VALUES ($1, $3, $4, $5) ON CONFLICT (resource) DO UPDATE SET slot_limit = $5"
    " WHERE flow_slot_keys.slot_limit <> $5),"
    " me AS (INSERT INTO flow_waiters AS f (resource, holder, priority) VALUES ($1, $6, $7)"
    " ON CONFLICT (resource, holder) DO UPDATE SET seen_at = now() RETURNING f.priority, f.seq)"
    " SELECT (SELECT count(*) FROM permit_slots s WHERE s.resource = $1 AND " + HELD + ") AS held,"
    " (SELECT count(*) FROM flow_waiters w, me WHERE w.resource = $1 AND w.holder <> $6"
    " AND " + _LIVE + " AND (w.priority, w.seq) < (me.priority, me.seq)) AS ahead"
)


async def queue_round(
    pool: asyncpg.Pool, slot: FlowSlot, holder: str, stale_seconds: float
) -> tuple[int, int]:
    """Queue ``holder`` (once; later rounds keep its place): (slots held, live waiters ahead)."""
    row = await pool.fetchrow(
        _ROUND,
        slot.resource,
        stale_seconds,
        slot.activity_id,
        slot.key,
        slot.limit,
        holder,
        slot.priority,
    )
    assert row is not None
    return int(row["held"]), int(row["ahead"])


async def record_acquired(
    pool: asyncpg.Pool, slot: FlowSlot, holder: str, permit_slot: str, run_id: str, lease: float
) -> tuple[int, bool]:
    """Leave the queue and record the held slot in one transaction: (token, fresh)."""
    async with pool.acquire() as con, con.transaction():
        await con.execute(
            "DELETE FROM flow_waiters WHERE resource = $1 AND holder = $2", slot.resource, holder
        )
        row = await con.fetchrow(
            RECORD_ACQUIRE, slot.resource, permit_slot, run_id, holder, max(1, round(lease))
        )
    assert row is not None
    return int(row["token"]), bool(row["fresh"])


async def after_release(
    pool: asyncpg.Pool, slot: FlowSlot, holder: str, stale_seconds: float
) -> list[str]:
    """After ``holder`` left (released, or gave up waiting): the waiters whose turn it is.

    Also sweeps the resource's silent waiters, and when nobody holds or waits, deletes
    the resource (its key row and its ended slot rows: never a held one).
    """
    async with pool.acquire() as con, con.transaction():
        await con.execute(
            "DELETE FROM flow_waiters w WHERE w.resource = $1"
            " AND (w.holder = $3 OR NOT (" + _LIVE + "))",
            slot.resource,
            stale_seconds,
            holder,
        )
        held = await con.fetchval(
            "SELECT count(*) FROM permit_slots s WHERE s.resource = $1 AND " + HELD,
            slot.resource,
        )
        free = max(0, slot.limit - int(held))
        rows = await con.fetch(
            "SELECT holder FROM flow_waiters WHERE resource = $1 ORDER BY priority, seq LIMIT $2",
            slot.resource,
            max(free, 1),
        )
        if not rows and held == 0:
            await con.execute(
                "DELETE FROM permit_slots WHERE resource = $1 AND ended_at IS NOT NULL",
                slot.resource,
            )
            await con.execute("DELETE FROM flow_slot_keys WHERE resource = $1", slot.resource)
    return [r["holder"] for r in rows[:free]]


@dataclass(frozen=True)
class ActivityUse:
    """One activity's slots in use and runs waiting, over all its keys (the gauges)."""

    activity_id: str
    in_use: int
    waiting: int
    oldest_wait_seconds: float  # the longest-waiting live waiter (0: none waits)


# Every activity whose definition has flow.concurrency, idle ones at 0.
_USE = (
    "SELECT a.id::text AS activity_id,"
    " (SELECT count(*) FROM flow_slot_keys k JOIN permit_slots s ON s.resource = k.resource"
    " WHERE k.activity_id = a.id AND " + HELD + ") AS in_use,"
    " (SELECT count(*) FROM flow_slot_keys k JOIN flow_waiters w ON w.resource = k.resource"
    " WHERE k.activity_id = a.id AND " + _LIVE.replace("$2", "$1") + ") AS waiting,"
    " (SELECT coalesce(extract(epoch FROM now() - min(w.arrived_at)), 0)::float8"
    " FROM flow_slot_keys k JOIN flow_waiters w ON w.resource = k.resource"
    " WHERE k.activity_id = a.id AND " + _LIVE.replace("$2", "$1") + ") AS oldest"
    " FROM activities a WHERE a.flow ? 'concurrency' ORDER BY a.id"
)


async def activity_use(pool: asyncpg.Pool, stale_seconds: float) -> list[ActivityUse]:
    rows = await pool.fetch(_USE, stale_seconds)
    return [
        ActivityUse(r["activity_id"], int(r["in_use"]), int(r["waiting"]), float(r["oldest"]))
        for r in rows
    ]
