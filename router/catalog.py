"""Which enabled activities subscribe to an event type: cached, refreshed in the background.

The router never restarts to pick up a new or disabled activity: the cache is
reloaded every ``refresh_seconds``. A failed refresh keeps the last good
snapshot (and logs), so a database blip does not stop routing.
"""

from __future__ import annotations

import asyncio
import logging
import time

import asyncpg
import orjson
from pydantic import ValidationError

from schemas.flow.spec import NO_TASKS, CancelRule, FlowDef, RunShape, run_shape

log = logging.getLogger(__name__)


class ActivityCatalog:
    def __init__(self, pool: asyncpg.Pool, refresh_seconds: float = 10.0) -> None:
        self.pool = pool
        self.refresh_seconds = refresh_seconds
        self._by_type: dict[str, tuple[str, ...]] = {}
        self._flows: dict[str, FlowDef] = {}
        self._shapes: dict[str, RunShape] = {}
        # flow.cancel_on: event type -> the activities whose rules name it.
        self._cancelled_by: dict[str, tuple[str, ...]] = {}
        self.loaded_at: float | None = None
        self._task: asyncio.Task[None] | None = None

    async def refresh(self) -> None:
        rows = await self.pool.fetch(
            "SELECT id::text AS id, trigger->>'event_type' AS event_type, flow, tasks"
            " FROM activities"
            " WHERE enabled AND trigger->>'type' = 'event' ORDER BY id"
        )
        by_type: dict[str, list[str]] = {}
        flows: dict[str, FlowDef] = {}
        shapes: dict[str, RunShape] = {}
        for r in rows:
            by_type.setdefault(r["event_type"], []).append(r["id"])
            shapes[r["id"]] = run_shape(orjson.loads(r["tasks"]) if r["tasks"] else [])
            if r["flow"] is not None:
                # Validated by ``activities apply``; a row that no longer parses fails
                # the refresh (the last good snapshot stays), never runs unpaced.
                flows[r["id"]] = FlowDef.model_validate(orjson.loads(r["flow"]))
        cancelled_by: dict[str, list[str]] = {}
        for activity_id, flow in flows.items():
            for etype in dict.fromkeys(r.event_type for r in flow.cancel_on or ()):
                cancelled_by.setdefault(etype, []).append(activity_id)
        self._by_type = {k: tuple(v) for k, v in by_type.items()}
        self._cancelled_by = {k: tuple(v) for k, v in cancelled_by.items()}
        self._flows = flows
        self._shapes = shapes
        self.loaded_at = time.monotonic()

    def subscribers(self, event_type: str) -> tuple[str, ...]:
        return self._by_type.get(event_type, ())

    def flow(self, activity_id: str) -> FlowDef | None:
        """The activity's flow block, or None when its runs are not paced."""
        return self._flows.get(activity_id)

    def cancel_rules(self, event_type: str) -> list[tuple[str, list[CancelRule]]]:
        """(activity, its cancel_on rules) of every activity an event of ``event_type``
        cancels runs of (a cancelling event, router/flow/cancel.py)."""
        ids = self._cancelled_by.get(event_type, ())
        return [(a, list(self._flows[a].cancel_on or ())) for a in ids]

    def shape(self, activity_id: str) -> RunShape:
        """How many tasks a run of the activity plans, and their own bytes."""
        return self._shapes.get(activity_id, NO_TASKS)

    async def start(self) -> None:
        await self.refresh()
        self._task = asyncio.create_task(self._loop(), name="activity-catalog-refresh")

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.refresh_seconds)
            try:
                await self.refresh()
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, ValidationError) as exc:
                log.warning("activity refresh failed, keeping the last snapshot: %s", exc)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
