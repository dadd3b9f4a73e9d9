"""``close_window``: freeze a window's members, start its run, mark it started.

Safe to repeat (a retry, a worker crash, a note the router repeats): under the
key's advisory lock (the one the router's assignments take) the window is closed,
its members read in their recorded order and the run derived from them, so every
attempt derives the same run and id; the start is REJECT_DUPLICATE; a window
already started answers ``already_started``.

A window no run can take is never retried for ever nor forgotten: every member goes to
the DLQ (``workers.flow.window_dead_letters``), and the window is marked
``dead_lettered``. The first freeze decides whether Temporal can carry the run
(``window_too_large``, before any start); a start Temporal refuses for good is
``window_start_refused``. An outage is raised, and Temporal retries the activity.

With ``flow.fairness``, the run carries the fairness key and weight of its last event
(the router checked every member's when it assigned it): the window's own key when the
fairness key is the window's key, as it should be (docs/flow-control.md).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import asyncpg
import orjson
from temporalio import activity
from temporalio.client import Client
from temporalio.service import RPCError

from pipeline.starter import STARTED, Starter, StartRejected, outage
from schemas import ids
from schemas.envelope import EnvelopeError
from schemas.flow import spec as flow
from schemas.flow.fairness import Fairness, fairness_of
from schemas.flow.io import CloseWindowInput, CloseWindowResult
from schemas.flow.spec import json_bytes, run_bytes, run_fits
from schemas.workflow_io import WINDOW_BATCH, RunActivityInput
from workers.flow import metrics as flow_metrics
from workers.flow import window_dead_letters as dead_letters
from workers.flow.window_dead_letters import (
    DEAD_LETTERED,
    R_WINDOW_START_REFUSED,
    R_WINDOW_TOO_LARGE,
)

log = logging.getLogger(__name__)

# How many tasks a run of the activity plans, and their own payloads' and configs' bytes:
# router.flow.windows.TASKS_SQL (what the router's batch budget was made of).
TASKS_SQL = (
    "SELECT coalesce(sum(coalesce((t->>'count')::int, 1)), 1)::int AS tasks,"
    " coalesce(sum(coalesce((t->>'count')::int, 1) * (octet_length(coalesce(t->'payload',"
    " '{}')::text) + octet_length(coalesce(t->'config', '{}')::text))), 0)::bigint AS own"
    " FROM activities a CROSS JOIN LATERAL jsonb_array_elements(a.tasks) t WHERE a.id = $1"
)


def carried(run: RunActivityInput) -> int:
    """The bytes of events each task of ``run`` carries: a batch's events, or a
    debounce's last event."""
    return json_bytes(run.events if run.events is not None else run.event)


@dataclass(frozen=True)
class Frozen:
    """What :func:`freeze` found: ``closed`` (with its run), ``started``, ``missing`` or
    ``dead_lettered`` (``size``: the DLQ records written now; 0 when it was before)."""

    state: str
    run: RunActivityInput | None = None
    size: int = 0
    detail: str = ""
    # flow.fairness of the run (its last event's key and weight), or None.
    fairness: Fairness | None = None


async def freeze(pool: asyncpg.Pool, inp: CloseWindowInput, dlq_topic: str) -> Frozen:
    """Close the window (if open) and derive its run.

    The first freeze of a window (no run recorded for it yet) dead-letters it when no
    run can carry it (``window_too_large``): the verdict is taken once, before any
    start, so a retry after a start never reverses it.
    """
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))",
            ids.window_lock_name(inp.activity_id, inp.key),
        )
        w = await conn.fetchrow(
            "SELECT kind, key, state, closed_by, run_workflow_id FROM flow_windows WHERE id = $1",
            inp.window_id,
        )
        if w is None:
            return Frozen("missing")
        if w["state"] == "started":
            return Frozen("started")
        if w["state"] == DEAD_LETTERED:
            return Frozen(DEAD_LETTERED)
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
        if w["run_workflow_id"] is None:  # the first freeze: can a run carry it?
            plan = await conn.fetchrow(TASKS_SQL, uuid.UUID(inp.activity_id))
            tasks, own, each = plan["tasks"], plan["own"], carried(run)
            if not run_fits(tasks, each, own):
                what = (
                    f"its {len(members)} events' {each} bytes"
                    if run.events is not None
                    else f"its last event's {each} bytes"
                )
                detail = (
                    f"{w['kind']} window {inp.window_id} of activity {inp.activity_id}:"
                    f" {tasks} tasks each carry {what}, a plan of"
                    f" {run_bytes(tasks, each, own)} bytes, over Temporal's"
                    f" {flow.BLOB_LIMIT}-byte payload limit"
                )
                if w["state"] == "open":
                    await conn.execute(
                        "UPDATE flow_windows SET state = 'closed', closed_by = $2,"
                        " closed_at = now() WHERE id = $1",
                        inp.window_id,
                        closed_by,
                    )
                n = await dead_letters.dead_letter(
                    conn, inp.window_id, dlq_topic, R_WINDOW_TOO_LARGE, detail
                )
                return Frozen(DEAD_LETTERED, None, n, detail)
        await conn.execute(
            "UPDATE flow_windows SET state = 'closed', closed_by = $2,"
            " closed_at = COALESCE(closed_at, now()), run_workflow_id = $3 WHERE id = $1",
            inp.window_id,
            closed_by,
            run.workflow_id,
        )
        fairness = await _fairness(conn, run)
    return Frozen("closed", run, len(members), fairness=fairness)


async def _fairness(conn: asyncpg.Connection, run: RunActivityInput) -> Fairness | None:
    """The run's fairness (flow.fairness of the activity as it is now, read from the
    window's last event), or None. A value the definition no longer accepts (it was
    edited since the event was assigned) starts the run without fairness: fairness only
    orders dispatch, and the window's events are not to be lost for it."""
    raw = await conn.fetchval(
        "SELECT flow->'fairness' FROM activities WHERE id = $1", uuid.UUID(run.activity_id)
    )
    if raw is None:
        return None
    last = run.event if run.event is not None else (run.events or [{}])[-1]
    try:
        return fairness_of(flow.FairnessDef.model_validate(orjson.loads(raw)), last)
    except (EnvelopeError, ValueError) as exc:
        log.warning("window run %s starts without fairness: %s", run.workflow_id, exc)
        return None


class FlowWindowActivities:
    def __init__(self, pool: asyncpg.Pool, client: Client, task_queue: str, dlq_topic: str) -> None:
        self._pool = pool
        self._dlq_topic = dlq_topic
        # Outages are not retried here: Temporal retries the activity (UNTIL_DONE).
        self._starter = Starter(client, task_queue, component="worker", retry_outages=False)

    def all(self) -> list[Callable[..., Any]]:
        return [self.close_window]

    @activity.defn(name="close_window")
    async def close_window(self, inp: CloseWindowInput) -> CloseWindowResult:
        frozen = await freeze(self._pool, inp, self._dlq_topic)
        run = frozen.run
        if frozen.state == DEAD_LETTERED:
            self._dead_lettered(inp, R_WINDOW_TOO_LARGE, frozen.size, frozen.detail)
            return CloseWindowResult(DEAD_LETTERED, None, frozen.size)
        if run is None:
            started = frozen.state == "started"
            return CloseWindowResult("already_started" if started else "empty")
        try:
            outcome = await self._starter.start(run, fairness=frozen.fairness)
        except (StartRejected, RPCError) as exc:
            if isinstance(exc, RPCError) and outage(exc) is not None:
                raise  # Temporal away: the activity is retried
            detail = (
                exc.detail
                if isinstance(exc, StartRejected)
                else f"{exc.status.name}: {exc.message}"
            )
            n = await self._refused(inp, f"start of {run.workflow_id} refused: {detail}")
            return CloseWindowResult(DEAD_LETTERED, run.workflow_id, n)
        await self._pool.execute(
            "UPDATE flow_windows SET state = 'started', started_at = now()"
            " WHERE id = $1 AND state = 'closed'",
            inp.window_id,
        )
        size = run.window.size if run.window else 0
        if outcome == STARTED and run.window is not None and run.window.kind == WINDOW_BATCH:
            flow_metrics.FLOW_BATCH_SIZE.labels(activity=inp.activity_id).observe(size)
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

    async def _refused(self, inp: CloseWindowInput, detail: str) -> int:
        """Dead-letter a window whose start Temporal refused for good."""
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))",
                ids.window_lock_name(inp.activity_id, inp.key),
            )
            n = await dead_letters.dead_letter(
                conn, inp.window_id, self._dlq_topic, R_WINDOW_START_REFUSED, detail
            )
        self._dead_lettered(inp, R_WINDOW_START_REFUSED, n, detail)
        return n

    @staticmethod
    def _dead_lettered(inp: CloseWindowInput, reason: str, n: int, detail: str = "") -> None:
        dead_letters.count(reason, n)
        if n:
            log.error(
                "window %d of activity %s (key %r): %d events sent to the DLQ (%s)%s",
                inp.window_id,
                inp.activity_id,
                inp.key,
                n,
                reason,
                f": {detail}" if detail else "",
            )
