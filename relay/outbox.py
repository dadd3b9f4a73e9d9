"""The relay's SQL over ``outbox`` and ``outbox_relay`` (schemas/migrations/0010_outbox.sql).

Order and visibility: rows are published in ``(txid, seq)`` order, and only rows
whose writing transaction id is below ``pg_snapshot_xmin(pg_current_snapshot())``,
the oldest transaction still running anywhere on the server. Every transaction
below it has ended, so the set of such rows never grows behind the relay's
progress: a row cannot become visible later at a position the relay has passed.
(A sequence alone is not enough: ``seq`` is taken at insert, not at commit, so
with concurrent writers a row with a smaller ``seq`` can commit after a larger one
was published. A "settle delay" only makes that unlikely: a transaction held open
longer than the delay still slips behind.) The price: a long-running writing
transaction anywhere on the server holds the relay back until it ends, which the
relay-lag metric and alert show.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import asyncpg
import orjson

from pipeline import db
from pipeline.tracing import TRACEPARENT


@dataclass(frozen=True, order=True)
class Position:
    """Where the relay stands: every row at or before ``(txid, seq)`` is published."""

    txid: int
    seq: int


START = Position(0, 0)  # nothing published yet


@dataclass(frozen=True)
class Row:
    id: str
    position: Position
    topic: str
    key: bytes | None
    headers: list[tuple[str, bytes]]  # with the row's traceparent, when it has one
    body: bytes
    created_at: datetime
    # The W3C traceparent of the step that wrote the row (tracing on in the worker), else
    # None; also in ``headers`` (the relay's ``publish`` span replaces it there, when on).
    traceparent: str | None = None


_VISIBLE = "txid < pg_snapshot_xmin(pg_current_snapshot())"


async def visible_after(conn: asyncpg.Connection, after: Position, limit: int) -> list[Row]:
    """The next ``limit`` rows after ``after`` that can no longer be overtaken."""
    records = await conn.fetch(
        "SELECT id, txid::text AS txid, seq, topic, key, headers::text AS headers, body,"
        " created_at, traceparent FROM outbox"
        f" WHERE (txid, seq) > ($1::text::xid8, $2) AND {_VISIBLE}"
        " ORDER BY txid, seq LIMIT $3",
        str(after.txid),
        after.seq,
        limit,
    )
    return [
        Row(
            r["id"],
            Position(int(r["txid"]), r["seq"]),
            r["topic"],
            r["key"],
            with_traceparent(
                [(str(k), str(v).encode()) for k, v in orjson.loads(r["headers"])],
                r["traceparent"],
            ),
            r["body"],
            r["created_at"],
            r["traceparent"],
        )
        for r in records
    ]


def with_traceparent(
    headers: list[tuple[str, bytes]], traceparent: str | None
) -> list[tuple[str, bytes]]:
    """``headers`` plus the row's ``traceparent`` header, unless they carry one already
    (a message written with its own, e.g. a dead-lettered event's)."""
    if traceparent and not any(k == TRACEPARENT for k, _ in headers):
        headers.append((TRACEPARENT, traceparent.encode("latin-1")))
    return headers


async def backlog(conn: asyncpg.Connection, after: Position) -> tuple[int, float]:
    """(rows not yet published, age in seconds of the oldest of them; 0 when none)."""
    row = await conn.fetchrow(
        "SELECT count(*) AS depth,"
        " COALESCE(EXTRACT(EPOCH FROM clock_timestamp() - min(created_at)), 0)::float8 AS lag"
        " FROM outbox WHERE (txid, seq) > ($1::text::xid8, $2)",
        str(after.txid),
        after.seq,
    )
    return int(row["depth"]), max(0.0, float(row["lag"]))


async def mirrored(conn: asyncpg.Connection, transactional_id: str) -> Position:
    """The progress last mirrored into PostgreSQL (never ahead of Kafka), else START."""
    row = await conn.fetchrow(
        "SELECT txid::text AS txid, seq FROM outbox_relay WHERE transactional_id = $1",
        transactional_id,
    )
    return Position(int(row["txid"]), row["seq"]) if row else START


async def mirror(conn: asyncpg.Connection, transactional_id: str, pos: Position) -> None:
    """Record ``pos`` (committed in Kafka) for pruning and metrics; never moves back."""
    await conn.execute(
        "INSERT INTO outbox_relay AS r (transactional_id, txid, seq)"
        " VALUES ($1, $2::text::xid8, $3) ON CONFLICT (transactional_id) DO UPDATE"
        " SET txid = EXCLUDED.txid, seq = EXCLUDED.seq, updated_at = now()"
        " WHERE (r.txid, r.seq) < (EXCLUDED.txid, EXCLUDED.seq)",
        transactional_id,
        str(pos.txid),
        pos.seq,
    )


async def prune(conn: asyncpg.Connection, transactional_id: str, retention_days: float) -> int:
    """Delete published rows older than the retention (0 = keep forever)."""
    return await db.prune_older_than(
        conn,
        "DELETE FROM outbox o USING outbox_relay r WHERE r.transactional_id = $2"
        " AND (o.txid, o.seq) <= (r.txid, r.seq)"
        " AND o.created_at < now() - make_interval(secs => $1)",
        retention_days,
        transactional_id,
    )


async def try_lock(conn: asyncpg.Connection, transactional_id: str) -> bool:
    """Take the session advisory lock that makes this relay the outbox's one owner.

    Held until ``conn`` closes: a relay that dies (even SIGKILLed) loses its socket,
    and the server frees the lock for the next relay at once.
    """
    return bool(
        await conn.fetchval(
            "SELECT pg_try_advisory_lock(hashtextextended($1, 0))", transactional_id
        )
    )
