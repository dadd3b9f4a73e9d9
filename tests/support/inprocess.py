"""The whole pipeline in-process: ingress, router and worker on one test's topics and queue."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from typing import Any

import asyncpg

from ingress.service import run_ingress
from ingress.settings import IngressSettings
from pipeline.runtime import Shutdown
from router.service import Router
from router.settings import RouterSettings
from workers.handlers import Registry
from workers.parts import PartFactory, core_part
from workers.settings import WorkerSettings
from workers.worker import run_worker


@dataclass(frozen=True)
class Groups:
    """The consumer groups of the running ingress and router (to wait on their commits)."""

    ingress: str
    router: str
    tasks: tuple[asyncio.Task[Any], ...] = ()  # ingress, router, worker

    def assert_running(self) -> None:
        """None of the three has stopped (a crash would otherwise show only as a timeout)."""
        assert not any(t.done() for t in self.tasks), "a pipeline process stopped"


@asynccontextmanager
async def pipeline(
    cfg: Any,
    temporal: Any,
    pool: asyncpg.Pool,
    tag: str,
    *,
    registry: Registry | None = None,
    parts: Sequence[PartFactory] = (core_part,),
) -> AsyncIterator[Groups]:
    """Ingress, router and worker until the block ends; then stopped as SIGTERM would,
    and ingress and worker must exit 0 (a clean drain). The worker serves ``parts``
    (the runs alone unless given; flow controls need ``workers.flow.part.flow_part``)
    with ``registry``'s task handlers (the installed ones unless given)."""
    groups = Groups(ingress=f"ing-{tag}", router=f"rt-{tag}")
    shutdown = Shutdown()
    ingress = asyncio.create_task(
        run_ingress(cfg, shutdown, config=IngressSettings(group=groups.ingress), serve=False)
    )
    router = Router(
        cfg,
        RouterSettings(group=groups.router, commit_interval_ms=100),
        client=temporal,
        pool=pool,
        shutdown=shutdown,
    )
    routing = asyncio.create_task(router.run())
    worker = asyncio.create_task(
        run_worker(
            cfg,
            shutdown,
            client=temporal,
            pool=pool,
            registry=registry,
            worker_settings=WorkerSettings(),
            parts=parts,
        )
    )
    try:
        yield replace(groups, tasks=(ingress, routing, worker))
    finally:
        shutdown.trigger()
        codes = await asyncio.wait_for(asyncio.gather(ingress, routing, worker), 60)
    assert codes[0] == 0 and codes[2] == 0, codes
