"""PostgreSQL access of permits: declared resources and per-slot fencing tokens.

``permit_resources`` is written by ``ingest activities apply``; ``permit_slots``
by the permit activities (one row per (resource, slot), its ``token`` rising by
one on every acquire). A slot counts as held while its row has no ``ended_at``
and its lease has not run out (a holder killed without running its release code
is counted until then: Temporal has already freed the slot by then).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

import asyncpg

from schemas.definitions import ResourceDef
from schemas.workflow_io import PermitLimits

HELD = "s.ended_at IS NULL AND s.acquired_at + make_interval(secs => s.lease_seconds) > now()"


# $1 resource, $2 slot, $3 permit run id, $4 holder, $5 lease seconds: the slot's
# token rises by one unless this permit run was already recorded (a retried step).
RECORD_ACQUIRE = (
    "INSERT INTO permit_slots AS s (resource, slot, token, run_id, holder, lease_seconds)"
    " VALUES ($1, $2, 1, $3, $4, $5)"
    " ON CONFLICT (resource, slot) DO UPDATE SET"
    " token = CASE WHEN s.run_id = EXCLUDED.run_id THEN s.token ELSE s.token + 1 END,"
    " acquired_at = CASE WHEN s.run_id = EXCLUDED.run_id THEN s.acquired_at ELSE now() END,"
    " ended_at = CASE WHEN s.run_id = EXCLUDED.run_id THEN s.ended_at END,"
    " outcome = CASE WHEN s.run_id = EXCLUDED.run_id THEN s.outcome END,"
    " run_id = EXCLUDED.run_id, holder = EXCLUDED.holder,"
    " lease_seconds = EXCLUDED.lease_seconds"
    " RETURNING token, (xmax = 0 OR acquired_at = now()) AS fresh"
)


async def upsert_resources(pool: asyncpg.Pool, defs: Sequence[ResourceDef]) -> list[str]:
    """Insert or update each resource; returns 'created'/'updated' each.

    A capacity change applies to acquires after it; permits already held run to
    release or lease expiry (slots above a lowered capacity are never acquired again).
    """
    out: list[str] = []
    for d in defs:
        created = await pool.fetchval(
            "INSERT INTO permit_resources"
            " (name, capacity, lease_seconds, backoff_seconds, max_backoff_seconds)"
            " VALUES ($1, $2, $3, $4, $5) ON CONFLICT (name) DO UPDATE SET"
            " capacity = EXCLUDED.capacity, lease_seconds = EXCLUDED.lease_seconds,"
            " backoff_seconds = EXCLUDED.backoff_seconds,"
            " max_backoff_seconds = EXCLUDED.max_backoff_seconds, updated_at = now()"
            " RETURNING (xmax = 0)",
            d.name,
            d.capacity,
            d.lease_seconds,
            d.backoff_seconds,
            d.max_backoff_seconds,
        )
        out.append("created" if created else "updated")
    return out


async def known_resources(pool: asyncpg.Pool, names: Iterable[str]) -> set[str]:
    rows = await pool.fetch(
        "SELECT name FROM permit_resources WHERE name = ANY($1::text[])", sorted(set(names))
    )
    return {r["name"] for r in rows}


async def limits(pool: asyncpg.Pool, resource: str) -> PermitLimits | None:
    row = await pool.fetchrow(
        "SELECT capacity, lease_seconds, backoff_seconds, max_backoff_seconds"
        " FROM permit_resources WHERE name = $1",
        resource,
    )
    if row is None:
        return None
    return PermitLimits(
        capacity=row["capacity"],
        lease_seconds=float(row["lease_seconds"]),
        backoff_seconds=float(row["backoff_seconds"]),
        max_backoff_seconds=float(row["max_backoff_seconds"]),
    )


async def record_acquire(
    pool: asyncpg.Pool, resource: str, slot: str, run_id: str, holder: str, lease_seconds: float
) -> tuple[int, bool]:
    """The slot's new fencing token, and False when this run was already recorded.

    Idempotent per permit run: a retried local activity (worker died after the
    write) gets the same token back instead of a second increment.
    """
    row = await pool.fetchrow(
        RECORD_ACQUIRE,
        resource,
        slot,
        run_id,
        holder,
        max(1, round(lease_seconds)),
    )
    assert row is not None
    return int(row["token"]), bool(row["fresh"])


async def record_end(
    pool: asyncpg.Pool, resource: str, slot: str, run_id: str, outcome: str
) -> bool:
    """Mark the slot's permit run ended; False when the row is another run's or already ended."""
    status = await pool.execute(
        "UPDATE permit_slots SET ended_at = now(), outcome = $4"
        " WHERE resource = $1 AND slot = $2 AND run_id = $3 AND ended_at IS NULL",
        resource,
        slot,
        run_id,
        outcome,
    )
    return status.endswith(" 1")


async def current_token(pool: asyncpg.Pool, resource: str, slot: str) -> int | None:
    value = await pool.fetchval(
        "SELECT token FROM permit_slots WHERE resource = $1 AND slot = $2", resource, slot
    )
    return int(value) if value is not None else None


async def held_counts(pool: asyncpg.Pool) -> list[tuple[str, int, int]]:
    """(resource, capacity, held) for every declared resource."""
    rows = await pool.fetch(
        "SELECT r.name, r.capacity, count(s.slot) FILTER (WHERE " + HELD + ") AS held"
        " FROM permit_resources r LEFT JOIN permit_slots s ON s.resource = r.name"
        " GROUP BY r.name, r.capacity ORDER BY r.name"
    )
    return [(r["name"], int(r["capacity"]), int(r["held"])) for r in rows]


@dataclass(frozen=True)
class SlotRow:
    resource: str
    slot: str
    capacity: int
    token: int
    run_id: str
    holder: str
    lease_seconds: int
    acquired_at: datetime
    ended_at: datetime | None
    outcome: str | None
    age_seconds: float
    held: bool


async def slots(pool: asyncpg.Pool, resource: str | None = None) -> list[SlotRow]:
    rows = await pool.fetch(
        "SELECT s.resource, s.slot, r.capacity, s.token, s.run_id, s.holder, s.lease_seconds,"
        " s.acquired_at, s.ended_at, s.outcome,"
        " extract(epoch FROM now() - s.acquired_at)::float8 AS age, (" + HELD + ") AS held"
        " FROM permit_slots s JOIN permit_resources r ON r.name = s.resource"
        " WHERE $1::text IS NULL OR s.resource = $1"
        " ORDER BY s.resource, length(s.slot), s.slot",
        resource,
    )
    return [
        SlotRow(
            r["resource"],
            r["slot"],
            r["capacity"],
            r["token"],
            r["run_id"],
            r["holder"],
            r["lease_seconds"],
            r["acquired_at"],
            r["ended_at"],
            r["outcome"],
            r["age"],
            r["held"],
        )
        for r in rows
    ]
