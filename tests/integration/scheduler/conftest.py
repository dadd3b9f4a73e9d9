"""Scheduler tests: the production worker in-process (``workers.worker.run_worker``:
the run workflows and the dispatcher), activities applied through the scheduler's own
store, schedules cleaned up after."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
import pytest
from temporalio.client import Client
from temporalio.service import RPCError

from app.parts import worker_parts
from definitions import store
from pipeline.runtime import Shutdown
from pipeline.settings import Settings
from schemas.definitions import ActivityDef
from schemas.ids import schedule_id
from workers.handlers import load_registry
from workers.settings import WorkerSettings
from workers.worker import run_worker


@pytest.fixture
def cron_worker(cfg: Settings, temporal: Client, db_pool: asyncpg.Pool) -> Callable[[], Any]:
    """``async with cron_worker():`` runs the worker exactly as ``ingest worker`` wires it."""

    @asynccontextmanager
    async def run() -> AsyncIterator[asyncio.Task[int]]:
        shutdown = Shutdown()
        task = asyncio.create_task(
            run_worker(
                cfg,
                shutdown,
                client=temporal,
                pool=db_pool,
                registry=load_registry(use_entry_points=False),
                worker_settings=WorkerSettings(),
                parts=worker_parts(),
            )
        )
        try:
            yield task
        finally:
            shutdown.trigger()
            assert await asyncio.wait_for(task, 60) == 0

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
