"""Scenario 4: stop a PRIVATE Temporal dev server mid-stream, then restart it.

The shared stack's Temporal is never touched: this test starts its own dev server
(``devstack.temporal.Temporal`` on a free port, SQLite in tmp, so a restart
keeps history). While it is down the router backs off
(``pipeline_start_errors_total`` rises) and commits nothing it has not started:
every committed offset has its ledger row. After the restart it catches up and the
invariant holds.
"""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest
from devstack.settings import StackSettings
from devstack.temporal import Temporal
from temporalio.client import Client

from tests.faults import harness as h
from tests.support import db, kafka
from tests.support.net import free_port
from tests.support.wait import eventually, quiet

N = h.events("temporal_outage", 200)
OUTAGE = h.scaled(10, 30)
PRODUCE_SECONDS = h.scaled(25, 90)


async def _committed_have_ledger_rows(stack, group: str, topic: str, pool) -> dict[int, int]:
    """Committed offsets; asserts every offset below them has its ledger row."""
    got = await kafka.committed(stack.kafka, group, topic)
    for p, off in got.items():
        n = await pool.fetchval(
            "SELECT count(*) FROM routed_triggers WHERE source_topic = $1 "
            "AND source_partition = $2 AND source_offset < $3",
            topic,
            p,
            off or 0,
        )
        assert n == (off or 0), f"partition {p}: committed {off}, but only {n} ledger rows"
    return {p: off or 0 for p, off in got.items()}


@pytest.mark.timeout(h.scaled(420, h.drain_seconds(N) + 900))
async def test_temporal_outage(stack, cfg, topics, task_queue, db_pool, fault):
    server = Temporal(
        StackSettings(dir=fault.tmp / "temporal", temporal_port=free_port(), temporal_ui=False)
    )
    await asyncio.to_thread(server.ensure)
    fault.cleanup(lambda: asyncio.to_thread(server.stop))
    etype = f"fault.temporal.{uuid.uuid4().hex[:8]}"
    aid = await db.seed_activity(db_pool, etype)
    ep = h.Endpoints(stack.kafka, server.address, cfg.database.url.get_secret_value())
    pipe = fault.pipeline(ep, topics, task_queue)
    figures = fault.figures("4 Temporal outage", events=N, kills=0, dlq=0, dlq_expected=0)
    produced = h.Produced()
    await pipe.spawn("ingress")
    worker = await pipe.spawn("worker")
    router = await pipe.spawn("router", metrics=True)
    producing = asyncio.create_task(
        h.produce_paced(stack.kafka, topics.raw, N, etype, PRODUCE_SECONDS, produced)
    )

    async def running() -> bool:
        router.assert_alive()
        worker.assert_alive()
        # A run logged means the worker is polling: a worker still starting up when the
        # server stops fails its namespace check and exits (not what this scenario tests).
        return await db_pool.fetchval("SELECT count(*) FROM activity_runs") > 0

    await eventually(running, 90, "the router to start runs and the worker to run them")
    await eventually(router.ready, 30, "the router's /metrics")
    errors_before = await router.metric("pipeline_start_errors_total", missing_ok=True)

    await asyncio.to_thread(server.stop)
    down_at = time.monotonic()

    async def committed() -> dict[int, int]:
        return await _committed_have_ledger_rows(stack, pipe.router_group, topics.events, db_pool)

    # The starts acknowledged before the stop get their last commit, then nothing moves.
    c0 = await quiet(committed, "the router's committed offsets", period=2.0, timeout=OUTAGE)
    await asyncio.sleep(max(0, OUTAGE - (time.monotonic() - down_at)))  # the outage itself
    router.assert_alive()
    errors = await router.metric("pipeline_start_errors_total")
    c1 = await committed()
    figures.update(start_errors=int(errors - errors_before))
    assert c1 == c0, f"offsets moved while Temporal was down: {c0} -> {c1}"
    assert errors > errors_before, "the router should count its failing starts"
    end = await kafka.end_offsets(stack.kafka, topics.events)
    assert sum(end.values()) > sum(c1.values()), "the outage should leave a backlog"

    await asyncio.to_thread(server.ensure)
    figures.update(restarts=1)
    await producing
    temporal = await Client.connect(server.address)
    expected = h.expected_workflow_ids([aid], topics.raw, produced.coords)
    await pipe.verify(temporal, db_pool, expected, figures, reduced_timeout=300)
    await pipe.committed_to_end("router", 60)
    router.assert_alive()
