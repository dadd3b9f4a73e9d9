"""Scenario 5: stop a PRIVATE PostgreSQL mid-stream, then restart it.

The shared PostgreSQL is never touched: this test starts its own embedded server
(``pipeline.stack.postgres.Postgres`` on a free port, data in tmp) and migrates it.
While it is down the router's ledger writes and the worker's bookkeeping
activities fail and are retried; after the restart everything completes and the
invariant holds.
"""

from __future__ import annotations

import asyncio
import time
import uuid

import asyncpg
import pytest

from pipeline import db
from pipeline.stack.postgres import Postgres
from pipeline.stack.settings import StackSettings
from tests import helpers
from tests.faults import harness as h

N = h.scaled(200, 3000)
OUTAGE = h.scaled(10, 30)
PRODUCE_SECONDS = h.scaled(25, 90)


@pytest.mark.timeout(h.scaled(420, h.drain_seconds(N) + 900))
async def test_postgres_outage(stack, topics, task_queue, temporal, tmp_path, monkeypatch):
    monkeypatch.delenv("DATABASE_URL", raising=False)  # Postgres.url would use it
    t0 = time.monotonic()
    server = Postgres(StackSettings(dir=tmp_path / "pg", pg_port=h.free_port()))
    await asyncio.to_thread(server.ensure)
    url = server.url
    conn = await asyncpg.connect(url)
    try:
        await db.migrate(conn)
    finally:
        await conn.close()
    pool = await db.create_pool(url, 1, 4)
    etype = f"fault.pg.{uuid.uuid4().hex[:8]}"
    aid = await helpers.seed_activity(pool, etype)
    await pool.close()
    ep = h.Endpoints(stack.kafka, stack.temporal, url)
    pipe = h.Pipeline(tmp_path, ep, topics, task_queue)
    produced = h.Produced()
    pool = None
    try:
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

        await helpers.eventually(running, 120, "runs to be logged")
        await asyncio.to_thread(server.stop)
        await asyncio.sleep(OUTAGE)
        assert not producing.done(), "the outage should happen while events flow"
        router.assert_alive()
        worker.assert_alive()
        await asyncio.to_thread(server.ensure)
        await producing
        pool = await db.create_pool(url, 1, 4)
        expected = h.expected_workflow_ids([aid], topics.raw, produced.coords)
        outcome = await h.verify(
            temporal, pool, task_queue, expected, timeout=h.scaled(300, h.drain_seconds(N))
        )
        await helpers.eventually(
            lambda: h.caught_up(stack.kafka, pipe.router_group, topics.events),
            60,
            "the router to catch up",
        )
        assert await pool.fetchval("SELECT count(*) FROM routed_triggers") == N
    except BaseException:
        print(pipe.logs())
        raise
    finally:
        await pipe.close()
        if pool is not None:
            await pool.close()
        await asyncio.to_thread(server.stop)
    h.record(
        "5 PostgreSQL outage",
        events=N,
        kills=0,
        restarts=1,
        lost=outcome.lost,
        duplicate_runs=outcome.duplicate_runs + outcome.duplicate_executions,
        dlq=0,
        dlq_expected=0,
        runs=outcome.runs,
        seconds=round(time.monotonic() - t0),
    )
