"""SQL for ``approvals`` and ``approval_events``: every write safe to repeat.

``record`` inserts audit entries with ``ON CONFLICT DO NOTHING`` (a retried or
replayed local activity writes nothing twice, and says which entries are new so
metrics count once) and moves the summary row forward only: it is updated when
the entries are newer than what it reflects (``last_seq``).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg
import orjson

from schemas.approval_io import (
    CLOSED,
    DECIDABLE,
    ESCALATED,
    ApprovalHead,
    AuditEntry,
    RecordApprovalInput,
)


def _ts(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


def _json(value: Any) -> str | None:
    return None if value is None else orjson.dumps(value).decode()


async def record(pool: asyncpg.Pool, inp: RecordApprovalInput) -> list[AuditEntry]:
    """Write the summary row and the entries; returns the entries that were new."""
    last = max(e.seq for e in inp.entries)
    closed = inp.status in CLOSED
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute(
            "INSERT INTO approvals (task_id, run_id, activity_id, status, round, approvers,"
            " escalate_to, deadline, payload, last_seq, requested_at, closed_at)"
            " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9::jsonb, $10, $11,"
            "  CASE WHEN $12 THEN now() END)"
            " ON CONFLICT (task_id) DO UPDATE SET status = EXCLUDED.status,"
            "  round = EXCLUDED.round, deadline = EXCLUDED.deadline, payload = EXCLUDED.payload,"
            "  last_seq = EXCLUDED.last_seq, updated_at = now(),"
            "  closed_at = COALESCE(approvals.closed_at, EXCLUDED.closed_at)"
            " WHERE approvals.last_seq < EXCLUDED.last_seq",
            inp.task_id,
            uuid.UUID(inp.run_id),
            uuid.UUID(inp.activity_id),
            inp.status,
            inp.round,
            inp.approvers,
            inp.escalate_to,
            None if closed else _ts(inp.deadline),
            _json(inp.payload),
            last,
            _ts(inp.requested_at),
            closed,
        )
        new: list[AuditEntry] = []
        for e in inp.entries:
            inserted = await conn.fetchval(
                "INSERT INTO approval_events (task_id, seq, at, kind, round, actor, decision,"
                " reason, waited_seconds, payload) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9,"
                " $10::jsonb) ON CONFLICT (task_id, seq) DO NOTHING RETURNING true",
                inp.task_id,
                e.seq,
                _ts(e.at),
                e.kind,
                e.round,
                e.actor,
                e.decision,
                e.reason,
                e.waited_seconds,
                _json(e.payload),
            )
            if inserted:
                new.append(e)
    return new


async def count_waiting(pool: asyncpg.Pool) -> int:
    """Approvals waiting for a person's decision (waiting or escalated)."""
    return int(
        await pool.fetchval(
            "SELECT count(*) FROM approvals WHERE status = ANY($1::text[])", list(DECIDABLE)
        )
    )


@dataclass(frozen=True)
class ApprovalRow(ApprovalHead):
    deadline: datetime | None
    requested_at: datetime
    updated_at: datetime
    payload: dict[str, Any]


async def list_approvals(
    pool: asyncpg.Pool, statuses: list[str], approver: str | None = None, limit: int = 100
) -> list[ApprovalRow]:
    """Approvals in ``statuses``, soonest deadline first; with ``approver``, only those that
    person may decide now (a listed approver, or the escalation contact once escalated)."""
    rows = await pool.fetch(
        "SELECT * FROM approvals WHERE status = ANY($1::text[])"
        " AND ($2::text IS NULL OR $2 = ANY(approvers)"
        "      OR (status = $3 AND $2 = ANY(escalate_to)))"
        " ORDER BY deadline NULLS LAST, task_id LIMIT $4",
        statuses,
        approver,
        ESCALATED,
        limit,
    )
    return [
        ApprovalRow(
            task_id=r["task_id"],
            run_id=str(r["run_id"]),
            activity_id=str(r["activity_id"]),
            status=r["status"],
            round=r["round"],
            approvers=list(r["approvers"]),
            escalate_to=list(r["escalate_to"]),
            deadline=r["deadline"],
            requested_at=r["requested_at"],
            updated_at=r["updated_at"],
            payload=orjson.loads(r["payload"]),
        )
        for r in rows
    ]


async def events(pool: asyncpg.Pool, task_id: str) -> list[asyncpg.Record]:
    return list(
        await pool.fetch("SELECT * FROM approval_events WHERE task_id = $1 ORDER BY seq", task_id)
    )


async def open_task_ids(pool: asyncpg.Pool) -> list[str]:
    """Every approval not closed yet (the sweep's candidates)."""
    rows = await pool.fetch("SELECT task_id FROM approvals WHERE closed_at IS NULL ORDER BY 1")
    return [r["task_id"] for r in rows]


async def close_without_decision(
    pool: asyncpg.Pool, task_id: str, status: str, reason: str
) -> bool:
    """Close an open approval whose workflow closed without closing it: the row and one
    audit entry (the next ``seq``), in one statement. False: it was closed already."""
    seq = await pool.fetchval(
        "WITH closed AS ("
        " UPDATE approvals SET status = $2, deadline = NULL, last_seq = last_seq + 1,"
        "  updated_at = now(), closed_at = now()"
        " WHERE task_id = $1 AND closed_at IS NULL RETURNING task_id, last_seq, round)"
        " INSERT INTO approval_events (task_id, seq, at, kind, round, reason)"
        " SELECT task_id, last_seq, now(), $2, round, $3 FROM closed RETURNING seq",
        task_id,
        status,
        reason,
    )
    return seq is not None
