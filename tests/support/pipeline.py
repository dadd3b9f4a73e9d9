"""The whole pipeline in this process: ingress, router and worker of one test's settings."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
from temporalio.client import Client

from ingress.service import run_ingress
from ingress.settings import IngressSettings
from pipeline.runtime import Shutdown
from pipeline.settings import Settings
from router.service import Router
from router.settings import RouterSettings
from workers.settings import WorkerSettings
from workers.worker import run_worker


@asynccontextmanager
async def running(
    cfg: Settings, temporal: Client, pool: asyncpg.Pool, tag: str
) -> AsyncIterator[list[asyncio.Task[Any]]]:
    """Ingress (group ``ing-{tag}``), router (group ``rt-{tag}``) and worker on ``cfg``'s
    topics, task queue and database; on exit they drain and stop, and each must have
    exited cleanly (ingress and worker 0, the router without raising)."""
    shutdown = Shutdown()
    router = Router(
        cfg,
        RouterSettings(group=f"rt-{tag}", commit_interval_ms=100),
        client=temporal,
        pool=pool,
        shutdown=shutdown,
    )
    tasks = [
        asyncio.create_task(
            run_ingress(cfg, shutdown, config=IngressSettings(group=f"ing-{tag}"), serve=False)
        ),
        asyncio.create_task(router.run()),
        asyncio.create_task(
            run_worker(cfg, shutdown, client=temporal, pool=pool, worker_settings=WorkerSettings())
        ),
    ]
    try:
        yield tasks
    finally:
        shutdown.trigger()
        codes = await asyncio.wait_for(asyncio.gather(*tasks), 60)
    assert codes == [0, None, 0], codes
