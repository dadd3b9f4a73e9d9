"""Pausing an activity: ``activities.paused_at`` and what a resume does with held runs.

The pause is the activity's state, not a flow control: the worker enforces it
(``start_run`` records a run of a paused activity ``held``, and the run waits in
``workers/hold.py``), so it is exact whatever the router's catalogue says.

* :func:`pause` sets ``paused_at``/``paused_by``/``paused_reason`` once (a second pause
  changes nothing and says since when and by whom) and writes the audit row.
* :func:`resume` clears them; with ``skip_held`` it marks the held runs ``skipped``
  (``ended_by = 'held:skipped'``, finished now, their singleton keys freed, as
  ``finish_run`` does, and their places in a ``flow.ordered`` line closed, as the finish
  step does: the row's status already frees the line, ``done_at`` is the record that
  lets the router's retention prune the place) in the same transaction. *After* that
  commit it lists the runs still held, oldest trigger first, and :func:`signal_held`
  wakes them (and the skipped ones, which then end) in that order. Listing after the
  commit is what makes the resume race-free: a run whose row was written held after the
  listing asks ``hold_check`` after the row was written, so after the pause was
  cleared, and goes on by itself.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime

import asyncpg
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from schemas.workflow_io import ACTIVITY_RESUMED_SIGNAL

ENDED_BY_SKIP = "held:skipped"


@dataclass(frozen=True)
class Activity:
    id: str
    name: str
    cron: bool


@dataclass(frozen=True)
class Paused:
    activity: Activity
    changed: bool  # False: it was paused already (the first pause's time and actor kept)
    paused_at: datetime
    paused_by: str
    reason: str | None
    held: int  # runs held now


@dataclass(frozen=True)
class Resumed:
    activity: Activity
    was_paused: bool
    # Workflow ids, oldest trigger first: the held runs to wake, and the ones skipped.
    held: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


async def find(pool: asyncpg.Pool, ref: str) -> Activity | None:
    """The activity whose id, or else whose name, is ``ref`` (None: none, or several
    of that name)."""
    try:
        rows = await pool.fetch(
            "SELECT id, name, trigger->>'type' = 'cron' AS cron FROM activities WHERE id = $1",
            uuid.UUID(ref),
        )
    except ValueError:
        rows = []
    if not rows:
        rows = await pool.fetch(
            "SELECT id, name, trigger->>'type' = 'cron' AS cron FROM activities WHERE name = $1",
            ref,
        )
    if len(rows) != 1:
        return None
    (r,) = rows
    return Activity(str(r["id"]), r["name"], bool(r["cron"]))


async def pause(pool: asyncpg.Pool, act: Activity, actor: str, reason: str | None) -> Paused:
    async with pool.acquire() as conn, conn.transaction():
        changed = await conn.fetchval(
            "UPDATE activities SET paused_at = now(), paused_by = $2, paused_reason = $3"
            " WHERE id = $1 AND paused_at IS NULL RETURNING true",
            uuid.UUID(act.id),
            actor,
            reason,
        )
        if changed:
            await _audit(conn, act.id, "pause", actor, reason)
        row = await conn.fetchrow(
            "SELECT paused_at, paused_by, paused_reason, (SELECT count(*) FROM activity_runs"
            " WHERE activity_id = $1 AND status = 'held') AS held FROM activities WHERE id = $1",
            uuid.UUID(act.id),
        )
    return Paused(
        act, bool(changed), row["paused_at"], row["paused_by"], row["paused_reason"], row["held"]
    )


async def resume(pool: asyncpg.Pool, act: Activity, actor: str, *, skip_held: bool) -> Resumed:
    aid = uuid.UUID(act.id)
    skipped: list[str] = []
    async with pool.acquire() as conn, conn.transaction():
        was_paused = await conn.fetchval(
            "UPDATE activities a SET paused_at = NULL, paused_by = NULL, paused_reason = NULL"
            " FROM activities old WHERE a.id = $1 AND old.id = a.id"
            " RETURNING old.paused_at IS NOT NULL",
            aid,
        )
        if skip_held:
            rows = await conn.fetch(
                "WITH s AS (UPDATE activity_runs SET status = 'skipped', ended_by = $2,"
                " finished_at = COALESCE(finished_at, now())"
                " WHERE activity_id = $1 AND status = 'held' RETURNING workflow_id, started_at,"
                " run_id), freed AS (DELETE FROM flow_singleton WHERE workflow_id IN"
                " (SELECT workflow_id FROM s)), closed AS (UPDATE flow_order_places"
                " SET done_at = now(), outcome = 'skipped' WHERE run_id IN (SELECT run_id"
                " FROM s) AND done_at IS NULL) SELECT workflow_id FROM s"
                " ORDER BY started_at, run_id",
                aid,
                ENDED_BY_SKIP,
            )
            skipped = [r["workflow_id"] for r in rows]
        held_before = await conn.fetchval(
            "SELECT count(*) FROM activity_runs WHERE activity_id = $1 AND status = 'held'", aid
        )
        await _audit(conn, act.id, "resume", actor, None, held_before + len(skipped), len(skipped))
    # After the commit (see the module doc): every run still held, oldest first.
    rows = await pool.fetch(
        "SELECT workflow_id FROM activity_runs WHERE activity_id = $1 AND status = 'held'"
        " ORDER BY started_at, run_id",
        aid,
    )
    return Resumed(act, bool(was_paused), [r["workflow_id"] for r in rows], skipped)


async def _audit(
    conn: asyncpg.Connection,
    activity_id: str,
    action: str,
    actor: str,
    reason: str | None,
    held: int = 0,
    skipped: int = 0,
) -> None:
    await conn.execute(
        "INSERT INTO activity_pauses (activity_id, action, actor, reason, held, skipped)"
        " VALUES ($1, $2, $3, $4, $5, $6)",
        uuid.UUID(activity_id),
        action,
        actor,
        reason,
        held,
        skipped,
    )


async def signal_held(client: Client, workflow_ids: list[str]) -> tuple[int, list[str]]:
    """Wake each run with ``activity_resumed``, in the order given, one after the other
    (so the runs are woken in their triggers' order). Returns (signalled, not found: runs
    no longer open, e.g. terminated by hand, whose rows stay as they are)."""
    sent, gone = 0, []
    for wid in workflow_ids:
        try:
            await client.get_workflow_handle(wid).signal(ACTIVITY_RESUMED_SIGNAL)
            sent += 1
        except RPCError as exc:
            if exc.status != RPCStatusCode.NOT_FOUND:
                raise
            gone.append(wid)
    return sent, gone


async def states(pool: asyncpg.Pool) -> dict[str, tuple[datetime | None, str | None, int]]:
    """Per activity id: (paused_at, paused_by, held runs), for listings."""
    rows = await pool.fetch(
        "SELECT a.id::text AS id, a.paused_at, a.paused_by,"
        " (SELECT count(*) FROM activity_runs r WHERE r.activity_id = a.id"
        " AND r.status = 'held') AS held FROM activities a"
    )
    return {r["id"]: (r["paused_at"], r["paused_by"], r["held"]) for r in rows}
