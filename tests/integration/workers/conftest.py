"""Worker tests: the real worker in-process on the per-test task queue (helpers that
start runs are in :mod:`tests.support.runs`)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
import pytest
from temporalio.client import Client

from pipeline.runtime import Shutdown
from pipeline.settings import Settings
from workers.handlers import Registry, load_registry
from workers.settings import WorkerSettings
from workers.worker import run_worker

WorkerFactory = Callable[..., Any]


@pytest.fixture
def worker(cfg: Settings, temporal: Client, db_pool: asyncpg.Pool) -> WorkerFactory:
    """``async with worker(registry=..., settings=..., emit_topic=...)``: a running worker."""

    @asynccontextmanager
    async def run(
        registry: Registry | None = None, settings: Settings | None = None, **wkw: Any
    ) -> AsyncIterator[asyncio.Task[int]]:
        shutdown = Shutdown()
        task = asyncio.create_task(
            run_worker(
                settings or cfg,
                shutdown,
                client=temporal,
                pool=db_pool,
                registry=registry or load_registry(use_entry_points=False),
                worker_settings=WorkerSettings(**wkw),
            )
        )
        try:
            yield task
        finally:
            shutdown.trigger()
            assert await asyncio.wait_for(task, 60) == 0

    return run
