"""What ``ingest flow list`` (and ``GET /api/flow``) shows of the controls that end runs
early: ``flow.cancel_on``, ``flow.timeouts`` and a singleton's ``mode: cancel``.

* :func:`ended_rows`, a listing source (:data:`router.flow.listing.SOURCES`): per
  activity (key ``''``), its runs that ended ``cancelled`` or ``timed_out`` in the last
  hour. Read from ``activity_runs``, only for the activities whose flow block declares
  one of those controls (the scan stays on their runs, by the activity's index).
* :func:`declared`: each such activity's rules and timeouts as declared, so an operator
  reading the counts sees what cancels or times its runs out.
"""

from __future__ import annotations

import uuid
from typing import Any, TypeAlias

import asyncpg

from schemas.flow.spec import FlowDef

Conn: TypeAlias = asyncpg.Pool | asyncpg.Connection

_ENDING = "a.flow ?| ARRAY['cancel_on', 'timeouts', 'singleton']"
_ONLY = "($1::uuid IS NULL OR a.id = $1::uuid)"


def _aid(activity_id: str | None) -> uuid.UUID | None:
    return uuid.UUID(activity_id) if activity_id else None


async def ended_rows(conn: Conn, activity_id: str | None) -> list[dict[str, Any]]:
    """``cancelled_last_hour`` and ``timed_out_last_hour`` per activity (none: no row)."""
    rows = await conn.fetch(
        "SELECT a.id::text AS activity_id,"
        " count(*) FILTER (WHERE r.status = 'cancelled') AS cancelled,"
        " count(*) FILTER (WHERE r.status = 'timed_out') AS timed_out"
        " FROM activities a JOIN activity_runs r ON r.activity_id = a.id"
        f" WHERE {_ENDING} AND {_ONLY} AND r.status IN ('cancelled', 'timed_out')"
        " AND r.finished_at > now() - interval '1 hour' GROUP BY a.id",
        _aid(activity_id),
    )
    return [
        {
            "activity_id": r["activity_id"],
            "key": "",
            "cancelled_last_hour": r["cancelled"],
            "timed_out_last_hour": r["timed_out"],
        }
        for r in rows
    ]


async def declared(conn: Conn, activity_id: str | None) -> list[dict[str, Any]]:
    """Per activity with cancel_on, timeouts or a cancelling singleton: what it declares
    (``cancel_on``: the rules as written; ``timeouts``: seconds; ``singleton_cancels``)."""
    rows = await conn.fetch(
        "SELECT a.id::text AS activity_id, a.name, a.flow::text AS flow FROM activities a"
        f" WHERE {_ENDING} AND {_ONLY} ORDER BY a.name, a.id",
        _aid(activity_id),
    )
    out = []
    for r in rows:
        flow = FlowDef.model_validate_json(r["flow"])
        sg = flow.singleton is not None and flow.singleton.mode == "cancel"
        if not (flow.cancel_on or flow.timeouts or sg):
            continue
        t = flow.timeouts
        out.append(
            {
                "activity_id": r["activity_id"],
                "activity": r["name"],
                "cancel_on": [c.model_dump() for c in flow.cancel_on or ()],
                "timeouts": None if t is None else {"start": t.start, "finish": t.finish},
                "singleton_cancels": sg,
            }
        )
    return out


def _seconds(s: float) -> str:
    for unit, size in (("h", 3600), ("m", 60)):
        if s >= size and s % size == 0:
            return f"{int(s // size)}{unit}"
    return f"{s:g}s"


def format_declared(rows: list[dict[str, Any]]) -> str:
    """One line per rule or timeout, under the activity's name."""
    lines = [f"{'ACTIVITY':<24} ENDS ITS RUNS EARLY WHEN"]
    for r in rows:
        what = [
            f"cancel_on {c['event_type']} where "
            + ", ".join(f"{theirs} = {ours}" for theirs, ours in c["match"].items())
            for c in r["cancel_on"]
        ]
        if r["timeouts"] is not None:
            t = r["timeouts"]
            parts = [f"{k} {_seconds(t[k])}" for k in ("start", "finish") if t[k] is not None]
            what.append("timeouts " + ", ".join(parts))
        if r["singleton_cancels"]:
            what.append("singleton mode: cancel (a new trigger of its key cancels it)")
        name = (r["activity"] or r["activity_id"])[:24]
        for i, w in enumerate(what):
            lines.append(f"{name if i == 0 else '':<24} {w}")
    return "\n".join(lines)
