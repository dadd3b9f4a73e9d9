"""What ``ingest flow list`` and the ops API (``GET /api/flow``) show: per activity and key.

One row per (activity, key value) that some flow control has state for. Each control
contributes its own fields through a *source* (:data:`SOURCES`): an async function
``(conn, activity_id | None) -> list[dict]`` whose dicts carry ``activity_id``, ``key``
and that control's fields; :func:`flow_rows` merges them by (activity, key). A
control without a source yet leaves its columns ``None`` (shown ``-``).

Columns (:data:`COLUMNS`): ``next_throttle_slot`` (seconds from now until a start
arriving now would go; 0: at once), ``rate_limit_free`` (triggers that would pass
now), ``singleton_holder``, ``skips_last_hour``; and, filled by the concurrency and
window controls, ``slots_in_use``, ``waiting`` and ``windows``; and by flow.ordered,
``order_waiting`` (runs behind the line's head) and ``order_head`` (``blocked``: the
head run failed and holds the line until ``ingest flow release``); by the controls that
end runs early (cancel_on, timeouts, singleton cancel: :mod:`router.flow.lifecycle_view`),
``cancelled_last_hour`` and ``timed_out_last_hour`` (per activity, key ``''``).
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any, TypeAlias

import asyncpg

from router.flow import lifecycle_view, order, windows
from router.flow.concurrency_view import concurrency_rows
from router.flow.pacing import Gcra
from schemas.flow.spec import FlowDef

Conn: TypeAlias = asyncpg.Pool | asyncpg.Connection
Source = Callable[[Conn, str | None], Awaitable[list[dict[str, Any]]]]

# (field, header, width) in display order.
COLUMNS: tuple[tuple[str, str, int], ...] = (
    ("slots_in_use", "IN USE", 6),
    ("waiting", "WAITING", 7),
    ("next_throttle_slot", "NEXT SLOT", 9),
    ("rate_limit_free", "RL FREE", 7),
    ("windows", "WINDOWS", 7),
    ("skips_last_hour", "SKIPS/H", 7),
    ("singleton_holder", "SINGLETON", 9),
    ("order_waiting", "IN LINE", 7),
    ("order_head", "HEAD", 8),
    ("cancelled_last_hour", "CANCEL/H", 8),
    ("timed_out_last_hour", "TMOUT/H", 7),
)


async def _fetch(conn: Conn, select: str, activity_id: str | None) -> list[asyncpg.Record]:
    """``select``'s rows; ``{only}`` in it stands for "of this activity, if one is given"."""
    only = "($1::uuid IS NULL OR activity_id = $1::uuid)"
    return list(
        await conn.fetch(select.format(only=only), uuid.UUID(activity_id) if activity_id else None)
    )


async def _gcra(conn: Conn, activity_id: str | None) -> list[dict[str, Any]]:
    """Throttle and rate-limit state, read against the flow block that made it."""
    rows = await _fetch(
        conn,
        "SELECT activity_id::text AS activity_id, control, key, tat, now() AS now,"
        " (SELECT flow::text FROM activities a WHERE a.id = g.activity_id) AS flow"
        " FROM flow_gcra g WHERE {only}",
        activity_id,
    )
    out = []
    for r in rows:
        flow = FlowDef.model_validate_json(r["flow"]) if r["flow"] else FlowDef()
        tat, now = r["tat"], r["now"]
        if r["control"] == "throttle" and flow.throttle is not None:
            nxt = Gcra.throttle(flow.throttle).next_start(tat, now)
            out.append({**_at(r), "next_throttle_slot": round((nxt - now).total_seconds(), 3)})
        elif r["control"] == "rate_limit" and flow.rate_limit is not None:
            g = Gcra.rate_limit(flow.rate_limit)
            ahead = max(0.0, (tat - now).total_seconds())
            free = max(0, int((g.tolerance - ahead) // g.interval) + 1)
            out.append({**_at(r), "rate_limit_free": free})
    return out


async def _singletons(conn: Conn, activity_id: str | None) -> list[dict[str, Any]]:
    rows = await _fetch(
        conn,
        "SELECT activity_id::text AS activity_id, key, workflow_id FROM flow_singleton"
        " WHERE {only}",
        activity_id,
    )
    return [{**_at(r), "singleton_holder": r["workflow_id"]} for r in rows]


async def _skips(conn: Conn, activity_id: str | None) -> list[dict[str, Any]]:
    rows = await _fetch(
        conn,
        "SELECT activity_id::text AS activity_id, coalesce(key, '') AS key, count(*) AS n"
        " FROM flow_decisions WHERE outcome = 'skip' AND decided_at > now() - interval '1 hour'"
        " AND {only} GROUP BY 1, 2",
        activity_id,
    )
    return [{**_at(r), "skips_last_hour": r["n"]} for r in rows]


def _at(r: asyncpg.Record) -> dict[str, Any]:
    return {"activity_id": r["activity_id"], "key": r["key"]}


SOURCES: list[Source] = [
    _gcra,
    _singletons,
    _skips,
    windows.listing_source,
    concurrency_rows,
    order.line_rows,
    lifecycle_view.ended_rows,
]


async def flow_rows(conn: Conn, activity_id: str | None = None) -> list[dict[str, Any]]:
    """Every (activity, key) with flow state, each with every column (None: no data)."""
    merged: dict[tuple[str, str], dict[str, Any]] = {}
    for source in SOURCES:
        for part in await source(conn, activity_id):
            row = merged.setdefault(
                (part["activity_id"], part["key"]),
                {"activity_id": part["activity_id"], "key": part["key"]}
                | {c: None for c, _, _ in COLUMNS},
            )
            row.update(part)
    names = dict(
        (r["id"], r["name"])
        for r in await conn.fetch(
            "SELECT id::text AS id, name FROM activities WHERE id::text = ANY($1::text[])",
            list({a for a, _ in merged}),
        )
    )
    return [merged[k] | {"activity": names.get(k[0], "")} for k in sorted(merged)]


def _cell(v: Any, width: int) -> str:
    if v is None:
        return f"{'-':>{width}}"
    if isinstance(v, float):
        return f"{v:>{width}.1f}"
    if isinstance(v, str):
        return f"{v[-width:]:>{width}}"
    return f"{v:>{width}}"


def format_rows(rows: list[dict[str, Any]]) -> str:
    head = f"{'ACTIVITY':<24} {'KEY':<16} " + " ".join(f"{h:>{w}}" for _, h, w in COLUMNS)
    lines = [head]
    for r in rows:
        name = r["activity"] or r["activity_id"]
        lines.append(
            f"{name[:24]:<24} {(r['key'] or '(all)')[:16]:<16} "
            + " ".join(_cell(r[c], w) for c, _, w in COLUMNS)
        )
    return "\n".join(lines)


def format_skips(skips: list[Any]) -> str:
    lines = [f"{'WHEN':<20} {'REASON':<11} {'KEY':<16} {'EVENT':<24} WORKFLOW"]
    for s in skips:
        at: datetime = s.at
        lines.append(
            f"{at:%Y-%m-%d %H:%M:%S} {s.reason:<11} {(s.key or '(all)')[:16]:<16}"
            f" {(s.event_id or '')[:24]:<24} {s.workflow_id}"
        )
    return "\n".join(lines)
