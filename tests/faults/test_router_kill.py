"""Scenario 1: SIGKILL the router repeatedly while events flow through real processes.

ingress, router and worker run as ``python -m pipeline.cli ...`` subprocesses on the
shared stack. Each kill lands after the current router made progress (new ledger
rows) and before the stream is done, so uncommitted starts are redone by the next
owner of the partitions. Then the invariant: one run row and one execution per
(activity, event), nothing lost.
"""

from __future__ import annotations

import asyncio
import random
import time
import uuid

import pytest

from tests import helpers
from tests.faults import harness as h

N = h.scaled(300, 10000)
KILLS = h.scaled(3, 10)
PRODUCE_SECONDS = h.scaled(10, 120)


@pytest.mark.timeout(h.scaled(300, h.drain_seconds(N) + 900))
async def test_router_sigkill_repeatedly(
    stack, cfg, topics, task_queue, temporal, db_pool, tmp_path
):
    t0 = time.monotonic()
    etype = f"fault.router.{uuid.uuid4().hex[:8]}"
    aid = await helpers.seed_activity(db_pool, etype)
    ep = h.Endpoints(stack.kafka, stack.temporal, cfg.database.url.get_secret_value())
    pipe = h.Pipeline(tmp_path, ep, topics, task_queue)
    produced = h.Produced()
    kills = 0
    try:
        await pipe.spawn("ingress")
        await pipe.spawn("worker")
        router = await pipe.spawn("router")
        producing = asyncio.create_task(
            h.produce_paced(stack.kafka, topics.raw, N, etype, PRODUCE_SECONDS, produced)
        )
        for _ in range(KILLS):
            before = await db_pool.fetchval("SELECT count(*) FROM routed_triggers")

            async def progressed(before: int = before, router: h.Child = router) -> bool:
                router.assert_alive()
                n = await db_pool.fetchval("SELECT count(*) FROM routed_triggers")
                return n > before

            await helpers.eventually(progressed, 90, "the router to route something")
            await asyncio.sleep(random.uniform(0.2, 1.5))
            await router.kill()
            kills += 1
            router = await pipe.restart(router)
        await producing
        routed = await db_pool.fetchval("SELECT count(*) FROM routed_triggers")
        assert routed < N, "every kill should land mid-stream"
        expected = h.expected_workflow_ids([aid], topics.raw, produced.coords)
        assert len(expected) == N
        print("produced", len(produced.coords), "routed", routed, time.monotonic() - t0)
        outcome = await h.verify(
            temporal, db_pool, task_queue, expected, timeout=h.scaled(240, h.drain_seconds(N))
        )
        await helpers.eventually(
            lambda: h.caught_up(stack.kafka, pipe.router_group, topics.events),
            60,
            "the router to commit to the end",
        )
        assert await db_pool.fetchval("SELECT count(*) FROM routed_triggers") == N
    except BaseException:
        print(pipe.logs())
        raise
    finally:
        await pipe.close()
    h.record(
        "1 router SIGKILL",
        events=N,
        kills=kills,
        restarts=kills,
        lost=outcome.lost,
        duplicate_runs=outcome.duplicate_runs + outcome.duplicate_executions,
        dlq=0,
        dlq_expected=0,
        runs=outcome.runs,
        seconds=round(time.monotonic() - t0),
    )
