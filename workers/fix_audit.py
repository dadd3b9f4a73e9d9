"""The audit of pause-and-fix: one ``task_fixes`` row per accepted operator action.

``record_fix`` runs as a local activity inside the update handler, so when the
operator's update returns, the row exists. It is safe to repeat: the row is keyed
by (task_id, seq) and inserted once; a ``fix`` also stores the patched payload on
the task row, so what the ops console shows is what the retry runs with.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any

import asyncpg
import orjson
from temporalio import activity

from schemas.workflow_io import RecordFixInput
from workers.metrics import TASK_FIXES

# The operator actions on a paused task (pipeline_task_fixes_total{action}).
FIX_ACTIONS = ("fix", "skip", "abort")


class FixActivities:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    def all(self) -> list[Callable[..., Any]]:
        return [self.record_fix]

    @activity.defn(name="record_fix")
    async def record_fix(self, inp: RecordFixInput) -> bool:
        """True if this call wrote the row (False on a repeat)."""
        e = inp.entry
        async with self._pool.acquire() as conn, conn.transaction():
            inserted = await conn.fetchval(
                "INSERT INTO task_fixes (task_id, seq, run_id, task_type, action, patch, error,"
                " actor, note, created_at) VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7, $8, $9,"
                " $10::timestamptz) ON CONFLICT (task_id, seq) DO NOTHING RETURNING true",
                inp.task_id,
                e.seq,
                uuid.UUID(inp.run_id),
                inp.task_type,
                e.action,
                None if e.patch is None else orjson.dumps(e.patch).decode(),
                e.error,
                e.actor,
                e.note,
                datetime.fromisoformat(e.at),
            )
            if inserted and inp.payload is not None:
                await conn.execute(
                    "UPDATE task_instances SET payload = $2::jsonb, updated_at = now()"
                    " WHERE id = $1",
                    inp.task_id,
                    orjson.dumps(inp.payload).decode(),
                )
        if inserted:
            TASK_FIXES.labels(action=e.action).inc()
        return bool(inserted)
