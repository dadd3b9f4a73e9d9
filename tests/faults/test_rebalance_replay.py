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
import uuid

import pytest

from tests.faults import harness as h
from tests.support import db, kafka
from tests.support.wait import eventually

N = h.events("rebalance_replay", 200)
PRODUCE_SECONDS = h.scaled(20, 100)


@pytest.mark.timeout(h.scaled(420, h.drain_seconds(N) + 900))
async def test_rebalance_then_replay(stack, cfg, topics, task_queue, temporal, db_pool, fault):
    etype = f"fault.rebalance.{uuid.uuid4().hex[:8]}"
    aid = await db.seed_activity(db_pool, etype)
    ep = h.Endpoints(stack.kafka, stack.temporal, cfg.database.url.get_secret_value())
    pipe = fault.pipeline(ep, topics, task_queue)
    figures = fault.figures("7 two routers, one killed", events=N, dlq=0, dlq_expected=0)
    produced = h.Produced()
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

    await eventually(both_routing, 90, "both routers to own partitions and route")
    await asyncio.sleep(random.uniform(0.5, 2))  # a random point mid-stream
    assert not producing.done()
    await first.kill()
    figures.update(kills=1, restarts=0)
    await producing
    expected = h.expected_workflow_ids([aid], topics.raw, produced.coords)
    outcome = await pipe.verify(temporal, db_pool, expected, figures, reduced_timeout=300)
    await pipe.committed_to_end("router", 60)
    second.assert_alive()

    # 8. Replay everything with a fresh group.
    replay = fault.figures("8 replay from offset 0", kills=0, restarts=0, dlq=0, dlq_expected=0)
    replay_group = f"replay-{uuid.uuid4().hex[:8]}"
    replayer = await pipe.spawn("router", metrics=True, INGEST_ROUTER_GROUP=replay_group)
    await eventually(
        lambda: h.caught_up(stack.kafka, replay_group, topics.events),
        120,
        "the replaying router to commit to the end",
    )
    await eventually(replayer.ready, 30, "the replaying router's /metrics")
    total = await kafka.count(stack.kafka, topics.events)
    started = await replayer.metric("pipeline_workflows_started_total", missing_ok=True)
    suppressed = await replayer.metric("pipeline_duplicates_suppressed_total")
    again = await h.measure(temporal, db_pool, task_queue, expected, timeout=60)
    replay.update(
        events=total,
        lost=again.lost,
        duplicate_runs=again.runs - outcome.runs,
        runs=int(started),
        suppressed=int(suppressed),
    )
    again.check()
    assert started == 0
    assert suppressed == total >= N
    assert again.runs == outcome.runs and again.executions == outcome.executions
