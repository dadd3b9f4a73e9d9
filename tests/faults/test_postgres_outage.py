"""Scenario 5: stop a PRIVATE PostgreSQL mid-stream, then restart it.

The shared PostgreSQL is never touched: this test starts its own embedded server
(``devstack.postgres.Postgres`` on a free port, data in tmp) and migrates it.
While it is down the router's ledger writes and the worker's bookkeeping
activities fail and are retried; after the restart everything completes and the
invariant holds.
"""

from __future__ import annotations

import asyncio
import uuid

import asyncpg
import pytest

from pipeline import db
from tests.faults import harness as h
from tests.support import db as seed
from tests.support.wait import eventually

N = h.events("postgres_outage", 200)
OUTAGE = h.scaled(10, 30)
PRODUCE_SECONDS = h.scaled(25, 90)


@pytest.mark.timeout(h.scaled(420, h.drain_seconds(N) + 900))
async def test_postgres_outage(stack, topics, task_queue, temporal, fault, monkeypatch):
    monkeypatch.delenv("DATABASE_URL", raising=False)  # Postgres.url would use it
    server, url = await fault.private_postgres()
    pool = await db.create_pool(url, 1, 4)
    etype = f"fault.pg.{uuid.uuid4().hex[:8]}"
    aid = await seed.seed_activity(pool, etype)
    await pool.close()
    ep = h.Endpoints(stack.kafka, stack.temporal, url)
    pipe = fault.pipeline(ep, topics, task_queue)
    figures = fault.figures("5 PostgreSQL outage", events=N, kills=0, dlq=0, dlq_expected=0)
    produced = h.Produced()
    await pipe.spawn("ingress")
    worker = await pipe.spawn("worker")
    router = await pipe.spawn("router")
    producing = asyncio.create_task(
        h.produce_paced(stack.kafka, topics.raw, N, etype, PRODUCE_SECONDS, produced)
    )

    async def running() -> bool:
        router.assert_alive()
        c = await asyncpg.connect(url)
        try:
            return await c.fetchval("SELECT count(*) FROM activity_runs") > 0
        finally:
            await c.close()

    await eventually(running, 120, "runs to be logged")
    await asyncio.to_thread(server.stop)
    await asyncio.sleep(OUTAGE)  # the outage itself
    assert not producing.done(), "the outage should happen while events flow"
    router.assert_alive()
    worker.assert_alive()
    await asyncio.to_thread(server.ensure)
    figures.update(restarts=1)
    await producing
    pool = await db.create_pool(url, 1, 4)
    fault.cleanup(pool.close)
    expected = h.expected_workflow_ids([aid], topics.raw, produced.coords)
    await pipe.verify(temporal, pool, expected, figures, reduced_timeout=300)
    await pipe.committed_to_end("router", 60)
    assert await pool.fetchval("SELECT count(*) FROM routed_triggers") == N
