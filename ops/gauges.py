"""``pipeline_tasks_pending_fix`` and ``pipeline_task_pending_fix_oldest_seconds``.

Recomputed from the database (the state of record) every
``INGEST_OPS_GAUGE_INTERVAL_SECONDS`` and after every operator action, by the
ops service only, so one process exports them and a series that drops to zero
disappears instead of lingering.
"""

from __future__ import annotations

import asyncio
import logging

import asyncpg

from ops import store
from ops.metrics import TASK_PENDING_FIX_OLDEST, TASKS_PENDING_FIX

log = logging.getLogger(__name__)


async def refresh(pool: asyncpg.Pool) -> int:
    """Set the gauges from the database; returns how many tasks are pending_fix."""
    summary = await store.pending_fix_summary(pool)
    TASKS_PENDING_FIX.clear()
    TASK_PENDING_FIX_OLDEST.clear()
    for activity, task_type, count, oldest in summary:
        TASKS_PENDING_FIX.labels(activity=activity, task_type=task_type).set(count)
        TASK_PENDING_FIX_OLDEST.labels(activity=activity, task_type=task_type).set(oldest)
    return sum(row[2] for row in summary)


async def refresh_forever(pool: asyncpg.Pool, interval: float, stop: asyncio.Event) -> None:
    while not stop.is_set():
        try:
            await refresh(pool)
        except Exception as exc:  # a database hiccup: keep the last values, try again
            log.warning("could not refresh the pending-fix gauges: %s", exc)
        try:
            await asyncio.wait_for(stop.wait(), interval)
        except TimeoutError:
            pass
