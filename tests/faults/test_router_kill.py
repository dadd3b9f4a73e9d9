"""Scenario 1: SIGKILL the router repeatedly while events flow through real processes.

ingress, router and worker run as ``python -m app.cli ...`` subprocesses on the
shared stack. Each kill lands after the current router made progress (new ledger
rows) and before the stream is done, so uncommitted starts are redone by the next
owner of the partitions. Then the invariant: one run row and one execution per
(activity, event), nothing lost.
"""

from __future__ import annotations

import asyncio
import random
import uuid

import pytest

from tests.faults import harness as h
from tests.support import db
from tests.support.wait import eventually

N = h.events("router_kill", 300)
KILLS = h.scaled(3, 10)
PRODUCE_SECONDS = h.scaled(45, 120)  # each restart takes ~10 s: kills must land mid-stream


@pytest.mark.timeout(h.scaled(300, h.drain_seconds(N) + 900))
async def test_router_sigkill_repeatedly(stack, cfg, topics, task_queue, temporal, db_pool, fault):
    etype = f"fault.router.{uuid.uuid4().hex[:8]}"
    aid = await db.seed_activity(db_pool, etype)
    ep = h.Endpoints(stack.kafka, stack.temporal, cfg.database.url.get_secret_value())
    pipe = fault.pipeline(ep, topics, task_queue)
    figures = fault.figures("1 router SIGKILL", events=N, dlq=0, dlq_expected=0)
    produced = h.Produced()
    await pipe.spawn("ingress")
    await pipe.spawn("worker")
    router = await pipe.spawn("router")
    producing = asyncio.create_task(
        h.produce_paced(stack.kafka, topics.raw, N, etype, PRODUCE_SECONDS, produced)
    )
    for kill in range(KILLS):
        before = await db_pool.fetchval("SELECT count(*) FROM routed_triggers")

        async def progressed(before: int = before, router: h.Child = router) -> bool:
            router.assert_alive()
            n = await db_pool.fetchval("SELECT count(*) FROM routed_triggers")
            return n > before

        await eventually(progressed, 90, "the router to route something")
        await asyncio.sleep(random.uniform(0.2, 1.5))  # a random point mid-stream
        await router.kill()
        router = await pipe.restart(router)
        figures.update(kills=kill + 1, restarts=kill + 1)
    routed_at_last_kill = await db_pool.fetchval("SELECT count(*) FROM routed_triggers")
    figures.update(routed_at_last_kill=routed_at_last_kill)
    await producing
    expected = h.expected_workflow_ids([aid], topics.raw, produced.coords)
    await pipe.verify(temporal, db_pool, expected, figures, reduced_timeout=240)
    assert routed_at_last_kill < N, "every kill should land mid-stream"
    assert len(expected) == N
    await pipe.committed_to_end("router", 60)
    assert await db_pool.fetchval("SELECT count(*) FROM routed_triggers") == N
