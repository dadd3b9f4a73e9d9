"""PostgreSQL side of flow concurrency: the slots, the wait queue, the per-key resources.

PostgreSQL is the one lock of a flow slot. ``flow_slot_acquire`` and
``flow_slot_release`` (migration 0013) run under a transaction-scoped advisory lock on
the resource: admission (slots held + live waiters ahead < limit), the claim of a
``permit_slots`` row (its fencing token + 1) and the release never interleave. A slot
is held while its row is (same rule as task permits: ``store.HELD``). ``flow_waiters``
orders the runs waiting for a resource by (priority, seq); a waiter counts while it
was seen within ``stale_seconds`` (every round refreshes it). ``flow_slot_keys`` names
the activity and key value behind a resource; it and the resource's slot rows go when
the resource is idle.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias

import asyncpg

from schemas.workflow_io import FlowSlot
from workers.permits.store import HELD

Conn: TypeAlias = asyncpg.Pool | asyncpg.Connection
_LIVE = "w.seen_at > now() - make_interval(secs => $1)"


@dataclass(frozen=True)
class Round:
    """One admit-and-acquire round as decided under the resource's lock."""

    slot: str | None  # the slot held (None: queued, not its turn)
    token: int | None
    waited_seconds: float  # since the run first queued (0: admitted on its first round)
    fresh: bool  # False: the holder already held it (a retried or replayed step)
    held: int | None  # slots held when it was decided (None when already held)
    ahead: int | None  # live waiters ahead of this run


async def acquire(
    pool: Conn,
    slot: FlowSlot,
    holder: str,
    holder_run_id: str,
    lease_seconds: float,
    stale_seconds: float,
) -> Round:
    """Take a slot if it is ``holder``'s turn, else queue it (once; later rounds keep
    its place). Idempotent: a holder that holds a slot gets it back unchanged."""
    row = await pool.fetchrow(
        "SELECT * FROM flow_slot_acquire($1, $2::uuid, $3, $4, $5, $6, $7, $8, $9)",
        slot.resource,
        slot.activity_id,
        slot.key,
        slot.limit,
        holder,
        slot.priority,
        holder_run_id,
        max(1, round(lease_seconds)),
        stale_seconds,
    )
    assert row is not None
    return Round(
        row["slot"],
        None if row["token"] is None else int(row["token"]),
        float(row["waited"]),
        bool(row["fresh"]),
        row["held"],
        row["ahead"],
    )


async def release(
    pool: asyncpg.Pool, slot: FlowSlot, holder: str, stale_seconds: float
) -> list[str]:
    """``holder`` leaves (released, or gave up waiting): the waiters whose turn it is now.

    Also sweeps the resource's silent waiters, and when nobody holds or waits, deletes
    the resource (its key row and its slot rows). Idempotent: a repeat ends nothing.
    """
    rows = await pool.fetch(
        "SELECT * FROM flow_slot_release($1, $2, $3, $4)",
        slot.resource,
        holder,
        slot.limit,
        stale_seconds,
    )
    return [r[0] for r in rows]


@dataclass(frozen=True)
class Holder:
    slot: str
    token: int
    holder: str  # the holding run's workflow id


async def oldest_holders(pool: asyncpg.Pool, resource: str, min_age: float, n: int) -> list[Holder]:
    """Up to ``n`` held slots of ``resource`` held for at least ``min_age`` s, oldest first
    (a dead holder's row keeps its age while live holders come and go)."""
    rows = await pool.fetch(
        "SELECT s.slot, s.token, s.holder FROM permit_slots s WHERE s.resource = $1 AND "
        + HELD
        + " AND s.acquired_at < now() - make_interval(secs => $2) ORDER BY s.acquired_at LIMIT $3",
        resource,
        min_age,
        n,
    )
    return [Holder(r["slot"], int(r["token"]), r["holder"]) for r in rows]


async def end_slot(pool: asyncpg.Pool, resource: str, held: Holder, outcome: str) -> bool:
    """End ``held``'s row if it still is that grant (same token, not ended): True if so."""
    status = await pool.execute(
        "UPDATE permit_slots SET ended_at = now(), outcome = $4"
        " WHERE resource = $1 AND slot = $2 AND token = $3 AND ended_at IS NULL",
        resource,
        held.slot,
        held.token,
        outcome,
    )
    return status.endswith(" 1")


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
    " WHERE k.activity_id = a.id AND " + _LIVE + ") AS waiting,"
    " (SELECT coalesce(extract(epoch FROM now() - min(w.arrived_at)), 0)::float8"
    " FROM flow_slot_keys k JOIN flow_waiters w ON w.resource = k.resource"
    " WHERE k.activity_id = a.id AND " + _LIVE + ") AS oldest"
    " FROM activities a WHERE a.flow ? 'concurrency' ORDER BY a.id"
)


async def activity_use(pool: asyncpg.Pool, stale_seconds: float) -> list[ActivityUse]:
    rows = await pool.fetch(_USE, stale_seconds)
    return [
        ActivityUse(r["activity_id"], int(r["in_use"]), int(r["waiting"]), float(r["oldest"]))
        for r in rows
    ]
