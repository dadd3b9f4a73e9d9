"""``close_window``: freeze a window's members, start its run, mark it started.

Safe to repeat (a retry, a worker crash, a note the router repeats): under the
key's advisory lock (the one the router's assignments take) the window is closed,
its members read in their recorded order and the run derived from them, so every
attempt derives the same run and id; the start is REJECT_DUPLICATE; a window
already started answers ``already_started``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import asyncpg
import orjson
from temporalio import activity
from temporalio.client import Client
from temporalio.exceptions import ApplicationError

from pipeline import metrics
from pipeline.starter import STARTED, Starter, StartRejected
from schemas import ids
from schemas.workflow_io import (
    WINDOW_BATCH,
    CloseWindowInput,
    CloseWindowResult,
    RunActivityInput,
)

log = logging.getLogger(__name__)


async def freeze(pool: asyncpg.Pool, inp: CloseWindowInput) -> tuple[str, RunActivityInput | None]:
    """Close the window (if open) and derive its run; ``("started", None)`` when its run
    was acknowledged before, ``("missing", None)`` when there is no such window."""
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))",
            ids.window_lock_name(inp.activity_id, inp.key),
        )
        w = await conn.fetchrow(
            "SELECT kind, key, state, closed_by FROM flow_windows WHERE id = $1", inp.window_id
        )
        if w is None:
            return "missing", None
        if w["state"] == "started":
            return "started", None
        members = await conn.fetch(
            "SELECT event_id, event FROM flow_members WHERE window_id = $1 ORDER BY position",
            inp.window_id,
        )
        closed_by = w["closed_by"] or inp.reason
        run = RunActivityInput.for_window(
            inp.activity_id,
            w["kind"],
            w["key"],
            [(m["event_id"], orjson.loads(m["event"])) for m in members],
            closed_by,
        )
        await conn.execute(
            "UPDATE flow_windows SET state = 'closed', closed_by = $2,"
            " closed_at = COALESCE(closed_at, now()), run_workflow_id = $3 WHERE id = $1",
            inp.window_id,
            closed_by,
            run.workflow_id,
        )
    return "closed", run


class FlowWindowActivities:
    def __init__(self, pool: asyncpg.Pool, client: Client, task_queue: str) -> None:
        self._pool = pool
        # Outages are not retried here: Temporal retries the activity (UNTIL_DONE).
        self._starter = Starter(client, task_queue, component="worker", retry_outages=False)

    def all(self) -> list[Callable[..., Any]]:
        return [self.close_window]

    @activity.defn(name="close_window")
    async def close_window(self, inp: CloseWindowInput) -> CloseWindowResult:
        state, run = await freeze(self._pool, inp)
        if run is None:
            return CloseWindowResult("already_started" if state == "started" else "empty")
        try:
            outcome = await self._starter.start(run)
        except StartRejected as exc:
            raise ApplicationError(exc.detail, type="StartRejected", non_retryable=True) from exc
        await self._pool.execute(
            "UPDATE flow_windows SET state = 'started', started_at = now()"
            " WHERE id = $1 AND state <> 'started'",
            inp.window_id,
        )
        size = run.window.size if run.window else 0
        if outcome == STARTED and run.window is not None and run.window.kind == WINDOW_BATCH:
            metrics.FLOW_BATCH_SIZE.labels(activity=inp.activity_id).observe(size)
        log.info(
            "window %d of activity %s (%s, %d events, %s): %s %s",
            inp.window_id,
            inp.activity_id,
            run.window.kind if run.window else "?",
            size,
            run.window.closed_by if run.window else "?",
            outcome,
            run.workflow_id,
        )
        return CloseWindowResult(outcome, run.workflow_id, size)
