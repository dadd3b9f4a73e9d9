"""Scenario 4: stop a PRIVATE Temporal dev server mid-stream, then restart it.

The shared stack's Temporal is never touched: this test starts its own dev server
(``pipeline.stack.temporal.Temporal`` on a free port, SQLite in tmp, so a restart
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
from temporalio.client import Client

from pipeline.stack.settings import StackSettings
from pipeline.stack.temporal import Temporal
from tests import helpers
from tests.faults import harness as h

N = h.scaled(200, 3000)
OUTAGE = h.scaled(10, 30)
PRODUCE_SECONDS = h.scaled(25, 90)


async def _committed_have_ledger_rows(stack, group: str, topic: str, pool) -> dict[int, int]:
    """Committed offsets; asserts every offset below them has its ledger row."""
    got = await helpers.committed(stack.kafka, group, topic)
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
async def test_temporal_outage(stack, cfg, topics, task_queue, db_pool, tmp_path):
    t0 = time.monotonic()
    server = Temporal(
        StackSettings(dir=tmp_path / "temporal", temporal_port=h.free_port(), temporal_ui=False)
    )
    await asyncio.to_thread(server.ensure)
    etype = f"fault.temporal.{uuid.uuid4().hex[:8]}"
    aid = await helpers.seed_activity(db_pool, etype)
    ep = h.Endpoints(stack.kafka, server.address, cfg.database.url.get_secret_value())
    pipe = h.Pipeline(tmp_path, ep, topics, task_queue)
    produced = h.Produced()
    try:
        await pipe.spawn("ingress")
        await pipe.spawn("worker")
        router = await pipe.spawn("router", metrics=True)
        producing = asyncio.create_task(
            h.produce_paced(stack.kafka, topics.raw, N, etype, PRODUCE_SECONDS, produced)
        )

        async def routing() -> bool:
            router.assert_alive()
            return await db_pool.fetchval("SELECT count(*) FROM routed_triggers") > 0

        await helpers.eventually(routing, 90, "the router to start runs")
        await helpers.eventually(router.ready, 30, "the router's /metrics")
        errors_before = await router.metric("pipeline_start_errors_total")

        await asyncio.to_thread(server.stop)
        down_at = time.monotonic()
        await asyncio.sleep(3)  # the last commit of starts acknowledged before the stop
        c0 = await _committed_have_ledger_rows(stack, pipe.router_group, topics.events, db_pool)
        await asyncio.sleep(max(0, OUTAGE - (time.monotonic() - down_at)))
        router.assert_alive()
        errors = await router.metric("pipeline_start_errors_total")
        c1 = await _committed_have_ledger_rows(stack, pipe.router_group, topics.events, db_pool)
        assert c1 == c0, f"offsets moved while Temporal was down: {c0} -> {c1}"
        assert errors > errors_before, "the router should count its failing starts"
        end = await helpers.end_offsets(stack.kafka, topics.events)
        assert sum(end.values()) > sum(c1.values()), "the outage should leave a backlog"

        await asyncio.to_thread(server.ensure)
        await producing
        temporal = await Client.connect(server.address)
        expected = h.expected_workflow_ids([aid], topics.raw, produced.coords)
        outcome = await h.verify(
            temporal, db_pool, task_queue, expected, timeout=h.scaled(300, h.drain_seconds(N))
        )
        await helpers.eventually(
            lambda: h.caught_up(stack.kafka, pipe.router_group, topics.events),
            60,
            "the router to catch up",
        )
        router.assert_alive()
    except BaseException:
        print(pipe.logs())
        raise
    finally:
        await pipe.close()
        await asyncio.to_thread(server.stop)
    h.record(
        "4 Temporal outage",
        events=N,
        kills=0,
        restarts=1,
        lost=outcome.lost,
        duplicate_runs=outcome.duplicate_runs + outcome.duplicate_executions,
        dlq=0,
        dlq_expected=0,
        runs=outcome.runs,
        seconds=round(time.monotonic() - t0),
        start_errors=int(errors - errors_before),
    )
