"""SQL of flow.ordered in the worker: a run's place and turn, closing a place.

A place is *closed* when its ``done_at`` is set (the run's finish step, a dropped
message, an operator's release) **or** when its run's row says it ended in a way that
frees the line (:data:`FREES_LINE`: succeeded, cancelled, timed out, skipped). The
second rule makes every path that ends a run (the finish step, the last task's step
that marks the run succeeded, a cancel or timeout, ``resume --skip-held``) move the
line, whether or not it knows about lines; ``done_at`` is the record. A failed run
frees nothing: its place stays open and holds the line until it is released.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import asyncpg

from schemas.status import FREES_ORDER_LINE
from schemas.workflow_io import OrderPlace

# The run outcomes that free the run's place in its line (a failure holds it).
FREES_LINE: tuple[str, ...] = FREES_ORDER_LINE


@dataclass(frozen=True)
class Turn:
    place: OrderPlace
    blocker: str | None  # the first open place before it (its workflow id); None: its turn
    waited_seconds: float = 0.0  # since its place was given


async def turn(conn: asyncpg.Pool | asyncpg.Connection, workflow_id: str) -> Turn | None:
    """The run's place and whether it is its turn (None: the run has no place)."""
    row = await conn.fetchrow(
        "SELECT p.activity_id::text AS activity_id, p.key, p.seq,"
        " extract(epoch FROM now() - p.placed_at)::float8 AS waited,"
        " (SELECT e.workflow_id FROM flow_order_open e"
        "  WHERE e.activity_id = p.activity_id AND e.key = p.key AND e.seq < p.seq"
        "  ORDER BY e.seq LIMIT 1) AS blocker"
        " FROM flow_order_places p WHERE p.workflow_id = $1",
        workflow_id,
    )
    if row is None:
        return None
    blocker = row["blocker"]
    place = OrderPlace(row["activity_id"], row["key"], row["seq"], blocker is None)
    return Turn(place, blocker, row["waited"])


async def close(conn: asyncpg.Pool | asyncpg.Connection, run_id: str, status: str) -> str | None:
    """Close the run's place when ``status`` frees its line; the workflow id of the next
    open place in the line (the run to wake), else None. A repeat closes nothing again
    and still names the next run (a wake lost with a crashed step is sent again)."""
    if status not in FREES_LINE:
        return None
    return await conn.fetchval(  # type: ignore[no-any-return]
        "WITH me AS (SELECT activity_id, key, seq FROM flow_order_places WHERE run_id = $1),"
        " closed AS (UPDATE flow_order_places SET done_at = now(), outcome = $2"
        "  WHERE run_id = $1 AND done_at IS NULL)"
        " SELECT n.workflow_id FROM flow_order_open n JOIN me"
        "  ON n.activity_id = me.activity_id AND n.key = me.key"
        " WHERE n.run_id <> $1 ORDER BY n.seq LIMIT 1",
        uuid.UUID(run_id),
        status,
    )


@dataclass(frozen=True)
class ActivityLines:
    """The gauges of one ordered activity (summed over its lines)."""

    activity_id: str
    waiting: int
    blocked: int
    oldest_blocked_seconds: float


async def activity_lines(conn: asyncpg.Pool | asyncpg.Connection) -> list[ActivityLines]:
    """Every activity that declares ``ordered`` (at 0 when idle), from ``flow_order_heads``."""
    rows = await conn.fetch(
        "SELECT a.id::text AS activity_id,"
        " COALESCE(sum(h.waiting), 0)::bigint AS waiting,"
        " count(*) FILTER (WHERE h.run_status = 'failed') AS blocked,"
        " COALESCE(extract(epoch FROM now() - min(h.run_finished_at)"
        "  FILTER (WHERE h.run_status = 'failed')), 0)::float8 AS oldest"
        " FROM activities a LEFT JOIN flow_order_heads h ON h.activity_id = a.id"
        " WHERE jsonb_typeof(a.flow::jsonb -> 'ordered') = 'object'"
        " GROUP BY a.id"
    )
    return [ActivityLines(r["activity_id"], r["waiting"], r["blocked"], r["oldest"]) for r in rows]
