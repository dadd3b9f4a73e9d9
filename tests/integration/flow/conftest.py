"""Flow test fixtures: a worker serving the runs *and* the flow part (slots, windows)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager

import asyncpg
import pytest
from temporalio.client import Client

from pipeline.settings import Settings
from tests.support.runs import worker_factory
from workers.flow.part import flow_part
from workers.handlers import Registry
from workers.parts import core_part

SlotWorker = Callable[..., AbstractAsyncContextManager[None]]


@pytest.fixture
def slot_worker(cfg: Settings, temporal: Client, db_pool: asyncpg.Pool) -> SlotWorker:
    """``async with slot_worker(registry)``: a worker with the runs and the flow part."""
    factory = worker_factory(cfg, temporal, db_pool)

    @asynccontextmanager
    async def run(registry: Registry, settings: Settings | None = None) -> AsyncIterator[None]:
        async with factory(registry=registry, settings=settings, parts=(core_part, flow_part)):
            yield

    return run
