"""Permit test fixtures: a worker serving the runs *and* the permit part."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
import pytest
from temporalio.client import Client

from pipeline.runtime import Shutdown
from pipeline.settings import Settings
from schemas.definitions import ResourceDef
from workers.handlers import Registry
from workers.parts import core_part
from workers.permits import store
from workers.permits.part import permit_part
from workers.settings import WorkerSettings
from workers.worker import run_worker

from .handlers import VISITS_DDL, max_inside


async def declare(pool: asyncpg.Pool, capacity: int, lease: int = 60, **kw: Any) -> str:
    """A fresh resource with short backoffs (tests must take seconds, not minutes)."""
    name = f"res-{uuid.uuid4().hex[:8]}"
    kw.setdefault("backoff_seconds", 0.2)
    kw.setdefault("max_backoff_seconds", 1.0)
    await store.upsert_resources(
        pool, [ResourceDef(name=name, capacity=capacity, lease_seconds=lease, **kw)]
    )
    return name


async def intervals(pool: asyncpg.Pool, open_until: Any = None) -> list[tuple[Any, Any]]:
    """Every visit as (entered, exited); unfinished visits end at ``open_until``."""
    rows = await pool.fetch("SELECT entered_at, exited_at FROM visits")
    assert all(r["exited_at"] is not None or open_until is not None for r in rows), rows
    return [(r["entered_at"], r["exited_at"] or open_until) for r in rows]


async def peak(pool: asyncpg.Pool, open_until: Any = None) -> int:
    return max_inside(await intervals(pool, open_until))


@pytest.fixture
async def visits_table(db_pool: asyncpg.Pool) -> asyncpg.Pool:
    await db_pool.execute(VISITS_DDL)
    return db_pool


@pytest.fixture
def permit_worker(cfg: Settings, temporal: Client, db_pool: asyncpg.Pool):  # type: ignore[no-untyped-def]
    @asynccontextmanager
    async def run(registry: Registry, settings: Settings | None = None) -> AsyncIterator[None]:
        shutdown = Shutdown()
        task = asyncio.create_task(
            run_worker(
                settings or cfg,
                shutdown,
                client=temporal,
                pool=db_pool,
                registry=registry,
                worker_settings=WorkerSettings(),
                parts=(core_part, permit_part),
            )
        )
        try:
            yield
        finally:
            shutdown.trigger()
            assert await asyncio.wait_for(task, 60) == 0

    return run
