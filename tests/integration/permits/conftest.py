"""Permit test fixtures: a worker serving the runs *and* the permit part."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
import pytest
from temporalio.client import Client

from pipeline.settings import Settings
from schemas.definitions import ResourceDef
from tests.support.runs import worker_factory
from workers.handlers import Registry
from workers.parts import core_part
from workers.permits import store
from workers.permits.part import permit_part

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
    """``async with permit_worker(registry)``: a worker with the runs and the permits."""
    factory = worker_factory(cfg, temporal, db_pool)

    @asynccontextmanager
    async def run(registry: Registry, settings: Settings | None = None) -> AsyncIterator[None]:
        async with factory(registry=registry, settings=settings, parts=(core_part, permit_part)):
            yield

    return run
