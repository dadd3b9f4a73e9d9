"""Raw Temporal client figures the router is compared with: what the server itself allows."""

from __future__ import annotations

import asyncio
import time
import uuid

from temporalio.client import Client
from temporalio.common import WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError

from schemas.workflow_io import RUN_ACTIVITY_WORKFLOW as WORKFLOW

LEVELS = (16, 32, 64, 128)


async def _start_many(
    client: Client, task_queue: str, wids: list[str], concurrency: int
) -> tuple[float, int, int]:
    """Start every id with REJECT_DUPLICATE; (seconds, started, duplicates)."""
    sem = asyncio.Semaphore(concurrency)
    started = dup = 0

    async def one(wid: str) -> None:
        nonlocal started, dup
        async with sem:
            try:
                await client.start_workflow(
                    WORKFLOW,
                    {"bench": True},
                    id=wid,
                    task_queue=task_queue,
                    id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
                )
                started += 1
            except WorkflowAlreadyStartedError:
                dup += 1

    t0 = time.perf_counter()
    await asyncio.gather(*(one(w) for w in wids))
    return time.perf_counter() - t0, started, dup


def fresh_ids(n: int) -> list[str]:
    tag = uuid.uuid4().hex[:8]
    return [f"bench-raw-{tag}-{i}" for i in range(n)]


async def start_ceiling(
    client: Client, task_queue: str, n_per_level: int, levels: tuple[int, ...] = LEVELS
) -> dict[str, object]:
    """Fresh starts/s at each concurrency; the best is the ceiling."""
    table: dict[str, float] = {}
    for c in levels:
        secs, started, _ = await _start_many(client, task_queue, fresh_ids(n_per_level), c)
        table[str(c)] = round(started / secs, 1)
    best = max(table, key=lambda k: table[k])
    return {"per_concurrency": table, "best_concurrency": int(best), "ceiling": table[best]}


async def duplicate_ceiling(
    client: Client, task_queue: str, n: int, levels: tuple[int, ...] = LEVELS
) -> dict[str, object]:
    """Duplicate rejections/s: start ``n`` ids once, then ask again at each concurrency."""
    wids = fresh_ids(n)
    await _start_many(client, task_queue, wids, 64)
    table: dict[str, float] = {}
    for c in levels:
        secs, started, dup = await _start_many(client, task_queue, wids, c)
        assert started == 0 and dup == n
        table[str(c)] = round(dup / secs, 1)
    best = max(table, key=lambda k: table[k])
    return {"per_concurrency": table, "best_concurrency": int(best), "ceiling": table[best]}
