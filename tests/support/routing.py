"""Run the live Router in-process until its group has committed the end offsets."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg

from tests.support import kafka
from tests.support.wait import eventually


async def route_until_committed(
    cfg: Any, rcfg: Any, temporal: Any, pool: asyncpg.Pool, timeout: float = 60
) -> Any:
    """The Router of ``cfg``/``rcfg``, run until it committed everything; returns it."""
    from pipeline.runtime import Shutdown
    from router.service import Router

    shutdown = Shutdown()
    router = Router(cfg, rcfg, client=temporal, pool=pool, shutdown=shutdown)
    task = asyncio.create_task(router.run())
    bootstrap, topic = cfg.kafka.bootstrap_servers, cfg.kafka.events_topic
    try:
        await eventually(
            lambda: kafka.caught_up(bootstrap, rcfg.group, topic),
            timeout,
            "router commits reaching the end offsets",
        )
    finally:
        shutdown.trigger()
        await asyncio.wait_for(task, 30)
    return router
