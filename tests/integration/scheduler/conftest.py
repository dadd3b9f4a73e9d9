"""Scheduler tests: a real worker in-process (the run workflows + the dispatcher),
activities applied through the scheduler's own store, schedules cleaned up after."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any

import asyncpg
import pytest
from temporalio.client import Client
from temporalio.service import RPCError
from temporalio.worker import Worker

from definitions import store
from pipeline.settings import Settings
from scheduler.dispatcher import CronActivities, CronFireWorkflow
from schemas.definitions import ActivityDef
from schemas.ids import schedule_id
from workers.activities import RunActivities
from workers.handlers import Resources, load_registry
from workers.workflows import RunActivityWorkflow, TaskInstanceWorkflow


@pytest.fixture
def cron_worker(cfg: Settings, temporal: Client, db_pool: asyncpg.Pool) -> Callable[[], Any]:
    """``async with cron_worker():`` runs both run workflows and the dispatcher."""

    @asynccontextmanager
    async def run() -> AsyncIterator[Worker]:
        tq = cfg.temporal.task_queue
        acts = RunActivities(db_pool, load_registry(use_entry_points=False), Resources())
        worker = Worker(
            temporal,
            task_queue=tq,
            workflows=[RunActivityWorkflow, TaskInstanceWorkflow, CronFireWorkflow],
            activities=acts.all() + CronActivities(temporal, db_pool, tq).all(),
        )
        task = asyncio.create_task(worker.run())
        try:
            yield worker
        finally:
            await worker.shutdown()
            await task

    return run


@pytest.fixture
async def activities(
    temporal: Client, db_pool: asyncpg.Pool
) -> AsyncIterator[Callable[..., Awaitable[ActivityDef]]]:
    """``await activities(trigger={...}, ...)`` inserts a cron activity; schedules deleted after."""
    made: list[str] = []

    async def make(trigger: dict[str, Any], **kw: Any) -> ActivityDef:
        aid = uuid.uuid4()
        act = ActivityDef.model_validate(
            {"id": aid, "name": f"cron {str(aid)[:8]}", "trigger": {"type": "cron", **trigger},
             "tasks": kw.pop("tasks", [{"type": "noop"}]), **kw}
        )  # fmt: skip
        await store.upsert(db_pool, [act])
        made.append(str(aid))
        return act

    yield make
    for aid in made:
        try:
            await temporal.get_schedule_handle(schedule_id(aid)).delete()
        except RPCError:
            pass


async def cron_runs(pool: asyncpg.Pool, activity_id: object) -> list[asyncpg.Record]:
    return list(
        await pool.fetch(
            "SELECT * FROM activity_runs WHERE activity_id = $1::uuid AND trigger_kind = 'cron'"
            " ORDER BY scheduled_for",
            str(activity_id),
        )
    )


async def nominal_times(pool: asyncpg.Pool, activity_id: object) -> list[datetime]:
    return [r["scheduled_for"] for r in await cron_runs(pool, activity_id)]
