"""flow.ordered, the router's half: each run takes its place in its key's line.

The order of a line is the order of the records on the events topic, per partition.
``Routing.submit`` calls :meth:`OrderLines.assign` once per batch, before it spawns the
per-message tasks (those decide concurrently, so nothing after this point runs in
offset order), over the batch's runs of ordered activities that the ledger does not
know, in batch order. One PostgreSQL call (``flow_order_assign``, migration 0019): it
locks the batch's lines in a stable order, then gives each run the next number of its
line, or the place it already has (a redelivered or replayed trigger: same place,
never a second one).

Why that is the events' order, whatever happens to the routers: a router reads a
partition from its committed offset on, in order, and assigns a run's place before
the run is started and before its offset can be committed. So when a record y gets
its place, every earlier record x of its partition either got one already (it was
read earlier by this router, or it is below the committed offset, which only passes
records fully handled), or is in the same call, ahead of y. Two routers that overlap
(a rebalance) assign in offset order each; the first call that sees a record decides
its place and the other gets it back.

A place whose run will never start (its message dead-lettered) is closed at once
(:meth:`OrderLines.drop`, outcome ``dropped``), so it never holds its line. The worker
(:mod:`workers.flow.order`) starts a run's tasks at its turn.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import asyncpg

from pipeline import db
from router.flow.keys import FlowKeys
from schemas.errors import IngestError
from schemas.status import FREES_ORDER_LINE
from schemas.workflow_io import RunActivityInput

CONTROL = "ordered"
DROPPED = "dropped"


@dataclass(frozen=True)
class PlaceRequest:
    """One run to place: its line (activity, key value) and where its record was read."""

    run: RunActivityInput
    key: str
    topic: str | None = None
    partition: int | None = None
    offset: int | None = None


@dataclass(frozen=True)
class Place:
    seq: int
    done: bool  # closed already (dropped, released or finished): it holds nothing


def line_key(keys: FlowKeys | None) -> str | None:
    """The run's line key when its activity declares ``ordered`` (None: not ordered)."""
    if keys is None or keys.flow.ordered is None:
        return None
    return keys.key(CONTROL)


class OrderLines:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool

    async def assign(self, requests: Sequence[PlaceRequest]) -> dict[str, Place]:
        """The place of each request's run, by workflow id, in one call (batch order)."""
        if not requests:
            return {}
        rows = await self.pool.fetch(
            "SELECT workflow_id, seq, done FROM flow_order_assign($1::uuid[], $2::text[],"
            " $3::text[], $4::uuid[], $5::text[], $6::text[], $7::int[], $8::bigint[])",
            [uuid.UUID(r.run.activity_id) for r in requests],
            [r.key for r in requests],
            [r.run.workflow_id for r in requests],
            [uuid.UUID(r.run.run_id) for r in requests],
            [r.run.event_id for r in requests],
            [r.topic for r in requests],
            [r.partition for r in requests],
            [r.offset for r in requests],
        )
        return {r["workflow_id"]: Place(r["seq"], r["done"]) for r in rows}

    async def drop(self, workflow_ids: Iterable[str]) -> int:
        """Close the places of runs that will never start (their message is dead-lettered);
        a place already closed keeps its outcome. How many were open."""
        status = await self.pool.execute(
            "UPDATE flow_order_places SET done_at = now(), outcome = $2"
            " WHERE workflow_id = ANY($1::text[]) AND done_at IS NULL",
            list(workflow_ids),
            DROPPED,
        )
        return int(status.split()[-1])

    async def prune(self, retention_days: float) -> int:
        """Closed places older than the ledger's retention: closed by ``done_at``, or by
        their run's row, which ended in a way that frees the line (a run ended by a path
        that does not know lines, e.g. a cancel, leaves ``done_at`` unset). A failed
        run's place holds its line and is kept until it is released."""
        return await db.prune_older_than(
            self.pool,
            "DELETE FROM flow_order_places p WHERE p.done_at < now() - make_interval(secs => $1)"
            " OR (p.done_at IS NULL AND EXISTS (SELECT 1 FROM activity_runs r"
            "  WHERE r.run_id = p.run_id AND r.status = ANY($2::text[])"
            "  AND r.finished_at < now() - make_interval(secs => $1)))",
            retention_days,
            list(FREES_ORDER_LINE),
        )


@dataclass(frozen=True)
class Released:
    """What ``ingest flow release`` did: the place it closed, and the run whose turn it is
    now (to wake; None: nobody waits)."""

    workflow_id: str
    run_status: str | None  # the released run's status then ('failed', 'running', ...)
    next_workflow_id: str | None


class NothingToRelease(IngestError, LookupError):
    """The line has no open place (or the workflow id no open place)."""


async def release(
    pool: asyncpg.Pool,
    activity_id: str,
    *,
    key: str | None = None,
    workflow_id: str | None = None,
    by: str,
) -> Released:
    """Close the head of a line (``key``; '' for an activity without a key) or the place
    of one run (``workflow_id``), recorded as ``released`` by ``by``, now.

    The run itself is not touched: a failed run stays failed, a stuck one keeps running
    (terminate it in Temporal if it must not go on). Its line goes on without it."""
    async with pool.acquire() as conn, conn.transaction():
        if workflow_id is None:
            row = await conn.fetchrow(
                "SELECT workflow_id, run_status FROM flow_order_heads"
                " WHERE activity_id = $1::uuid AND key = $2",
                activity_id,
                key or "",
            )
        else:
            row = await conn.fetchrow(
                "SELECT workflow_id, run_status FROM flow_order_open"
                " WHERE activity_id = $1::uuid AND workflow_id = $2",
                activity_id,
                workflow_id,
            )
        if row is None:
            what = f"run {workflow_id}" if workflow_id else f"key {key or '(all)'!r}"
            raise NothingToRelease(f"activity {activity_id}: no open place for {what}")
        line = await conn.fetchrow(
            "UPDATE flow_order_places SET done_at = now(), outcome = 'released',"
            " released_by = $2 WHERE workflow_id = $1 RETURNING activity_id, key",
            row["workflow_id"],
            by,
        )
        nxt = await conn.fetchval(
            "SELECT workflow_id FROM flow_order_open WHERE activity_id = $1 AND key = $2"
            " ORDER BY seq LIMIT 1",
            line["activity_id"],
            line["key"],
        )
    return Released(row["workflow_id"], row["run_status"], nxt)


async def line_rows(
    conn: asyncpg.Pool | asyncpg.Connection, activity_id: str | None
) -> list[dict[str, object]]:
    """``ingest flow list``'s source (router/flow/listing.py): per line with an open
    place, how many runs wait behind its head, and the head's state (``blocked``: its
    run failed; ``running``; ``pending``: not started yet)."""
    rows = await conn.fetch(
        "SELECT activity_id::text AS activity_id, key, waiting, run_status FROM flow_order_heads"
        " WHERE ($1::uuid IS NULL OR activity_id = $1::uuid)",
        uuid.UUID(activity_id) if activity_id else None,
    )
    return [
        {
            "activity_id": r["activity_id"],
            "key": r["key"],
            "order_waiting": r["waiting"],
            "order_head": "blocked"
            if r["run_status"] == "failed"
            else r["run_status"] or "pending",
        }
        for r in rows
    ]
