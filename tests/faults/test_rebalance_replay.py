"""Scenarios 7 and 8: two routers in one group, one SIGKILLed (a rebalance); then a
replay of the whole events topic from offset 0 by a fresh router group starts nothing.

7: the survivor takes over the dead member's partitions and redoes its uncommitted
   starts, absorbed as duplicates: nothing lost, nothing runs twice.
8: a router in a new consumer group reads everything again; every start is
   suppressed (ledger or Temporal), ``pipeline_workflows_started_total`` stays 0,
   and no run row or execution is added.
"""

from __future__ import annotations

import asyncio
import random
import time
import uuid

import pytest

from tests import helpers
from tests.faults import harness as h

N = h.scaled(200, 5000)
PRODUCE_SECONDS = h.scaled(20, 100)


@pytest.mark.timeout(h.scaled(420, h.drain_seconds(N) + 900))
async def test_rebalance_then_replay(stack, cfg, topics, task_queue, temporal, db_pool, tmp_path):
    t0 = time.monotonic()
    etype = f"fault.rebalance.{uuid.uuid4().hex[:8]}"
    aid = await helpers.seed_activity(db_pool, etype)
    ep = h.Endpoints(stack.kafka, stack.temporal, cfg.database.url.get_secret_value())
    pipe = h.Pipeline(tmp_path, ep, topics, task_queue)
    produced = h.Produced()
    try:
        await pipe.spawn("ingress")
        await pipe.spawn("worker")
        first = await pipe.spawn("router")
        second = await pipe.spawn("router")
        producing = asyncio.create_task(
            h.produce_paced(stack.kafka, topics.raw, N, etype, PRODUCE_SECONDS, produced)
        )

        async def both_routing() -> bool:
            first.assert_alive()
            second.assert_alive()
            logs = [c.logfile.read_text() for c in (first, second)]
            n = await db_pool.fetchval("SELECT count(*) FROM routed_triggers")
            return all("assigned [(" in t for t in logs) and n > 0

        await helpers.eventually(both_routing, 90, "both routers to own partitions and route")
        await asyncio.sleep(random.uniform(0.5, 2))
        assert not producing.done()
        await first.kill()
        await producing
        expected = h.expected_workflow_ids([aid], topics.raw, produced.coords)
        outcome = await h.verify(
            temporal, db_pool, task_queue, expected, timeout=h.scaled(300, h.drain_seconds(N))
        )
        await helpers.eventually(
            lambda: h.caught_up(stack.kafka, pipe.router_group, topics.events),
            60,
            "the surviving router to commit to the end",
        )
        second.assert_alive()
        h.record(
            "7 two routers, one killed",
            events=N,
            kills=1,
            restarts=0,
            lost=outcome.lost,
            duplicate_runs=outcome.duplicate_runs + outcome.duplicate_executions,
            dlq=0,
            dlq_expected=0,
            runs=outcome.runs,
            seconds=round(time.monotonic() - t0),
        )

        # 8. Replay everything with a fresh group.
        t1 = time.monotonic()
        replay_group = f"replay-{uuid.uuid4().hex[:8]}"
        replayer = await pipe.spawn("router", metrics=True, INGEST_ROUTER_GROUP=replay_group)
        await helpers.eventually(
            lambda: h.caught_up(stack.kafka, replay_group, topics.events),
            120,
            "the replaying router to commit to the end",
        )
        await helpers.eventually(replayer.ready, 30, "the replaying router's /metrics")
        total = sum((await helpers.end_offsets(stack.kafka, topics.events)).values())
        started = await replayer.metric("pipeline_workflows_started_total")
        suppressed = await replayer.metric("pipeline_duplicates_suppressed_total")
        assert started == 0
        assert suppressed == total >= N
        again = await h.verify(temporal, db_pool, task_queue, expected, timeout=60)
        assert again.runs == outcome.runs and again.executions == outcome.executions
    except BaseException:
        print(pipe.logs())
        raise
    finally:
        await pipe.close()
    h.record(
        "8 replay from offset 0",
        events=total,
        kills=0,
        restarts=0,
        lost=again.lost,
        duplicate_runs=again.runs - outcome.runs,
        dlq=0,
        dlq_expected=0,
        runs=0,
        seconds=round(time.monotonic() - t1),
    )
