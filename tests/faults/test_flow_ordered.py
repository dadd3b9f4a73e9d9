"""Scenarios 23-25: flow.ordered (issue 39) under a router SIGKILL, a worker SIGKILL and a
two-router rebalance.

An activity ``ordered: {key: data.k}`` with one ``flow_visit`` task (it records when it
is inside, on the database's clock); id-less events keyed by entity, several keys on
every raw partition, interleaved, through real ingress, router and worker processes.
Afterwards, besides the fault suite's invariant (0 lost, 0 extra, one run row, one
execution and one task row per event: ``harness.verify``), per key and in its events'
order (``ordered.measure_order``): each run has its place, numbered 1, 2, ... in that
order and closed; each run's task first entered after the run ahead of it finished
(so runs started strictly in event order); every task completed once (a completion
its killed worker never reported is retried by Temporal, which runs activities at
least once: counted as ``redone``).

23. The router SIGKILLed mid-stream, several times, ledger off and commits 3 s apart: each
    kill leaves placed (and started) but uncommitted triggers that the next router reads
    again and places again, which must give each its place back.
24. The worker SIGKILLed while a run of a line is inside its task and others wait behind
    it, several times: the cut attempt is retried, the waiting runs find their turn.
25. Two routers in one group: a second one joins mid-stream (partitions move), then the
    first is SIGKILLed (its partitions move to the survivor, which reads its uncommitted
    triggers again).

Reduced (CI): a few tens of events and seconds each; ``FAULTS_SCALE=full`` (``make
faults``) runs more events and kills (``h.scaled``).
"""

from __future__ import annotations

import asyncio
import random
import uuid
from datetime import datetime
from typing import Any

import asyncpg
import pytest

from tests.faults import harness as h
from tests.faults.ordered import (
    VISIT_HANDLERS,
    Keyed,
    measure_order,
    produce_keyed,
    spread_keys,
)
from tests.integration.flow.slot_handlers import FLOW_VISITS_DDL
from tests.support import db
from tests.support.wait import eventually

FLOW = {"ordered": {"key": "data.k"}}
TASK = {
    "type": "flow_visit",
    # A killed attempt is retried in seconds, not after the default 60 s heartbeat timeout.
    "config": {"heartbeat_timeout_seconds": 2, "timeout_seconds": 30, "retry_initial_seconds": 0.2},
}
PARTITIONS = 3  # of the test topics (tests/conftest.py)
KEYS = spread_keys(2, PARTITIONS)  # two keys on each raw (and events) partition


async def _places(pool: asyncpg.Pool) -> int:
    return int(await pool.fetchval("SELECT count(*) FROM flow_order_places"))


async def _waiting(pool: asyncpg.Pool) -> int:
    """Runs placed behind an open place of their line (across lines)."""
    return int(await pool.fetchval("SELECT coalesce(sum(waiting), 0) FROM flow_order_heads"))


class _Run:
    """One scenario's activity, pipeline and figures."""

    def __init__(self, fault: Any, stack: Any, cfg: Any, topics: Any, task_queue: str,
                 title: str, events: int) -> None:  # fmt: skip
        ep = h.Endpoints(stack.kafka, stack.temporal, cfg.database.url.get_secret_value())
        self.stack, self.topics, self.events = stack, topics, events
        self.pipe = fault.pipeline(ep, topics, task_queue)
        self.figures = fault.figures(title, events=events, dlq=0, dlq_expected=0)
        self.produced = Keyed()
        self.etype = f"fault.ordered.{uuid.uuid4().hex[:8]}"
        self.aid = ""
        self.workers = 0

    async def seed(self, pool: asyncpg.Pool) -> None:
        await pool.execute(FLOW_VISITS_DDL)
        self.aid = await db.seed_activity(pool, self.etype, tasks=[TASK], flow=FLOW)

    async def worker(self) -> h.Child:
        name = f"w{self.workers}"
        self.workers += 1
        return await self.pipe.spawn(
            "worker", INGEST_TASK_HANDLERS=VISIT_HANDLERS, FLOW_TEST_WORKER=name
        )

    def produce(self, seconds: float, hold: float) -> asyncio.Task[None]:
        return asyncio.create_task(
            produce_keyed(
                self.stack.kafka, self.topics.raw, self.events, self.etype, KEYS, seconds,
                self.produced, data=lambda i: {"hold": hold},
            )
        )  # fmt: skip

    async def verify(
        self, temporal: Any, pool: asyncpg.Pool, killed_at: dict[str, datetime] | None = None
    ) -> None:
        expected = h.expected_workflow_ids([self.aid], self.topics.raw, self.produced.coords)
        assert len(expected) == self.events
        outcome = await h.measure(
            temporal, pool, self.pipe.task_queue, expected, 1,
            h.scaled(240, h.drain_seconds(self.events) + 300),
        )  # fmt: skip
        self.figures.update(**outcome.figures())
        order = await measure_order(pool, self.aid, self.topics.raw, self.produced, killed_at)
        self.figures.update(**order.figures())
        outcome.check()
        order.check()
        # The lines were really used: some runs were placed while the run ahead of them
        # had not finished (else the order would hold without the control).
        assert order.contended > 0, "no run ever waited in its line"
        if killed_at is None:  # no worker killed: every task ran exactly once, uncut
            assert order.interrupted == 0, order.examples
        else:
            assert order.interrupted > 0, "no kill landed while a task was inside"
        await self.pipe.committed_to_end("router", 60)


# --- 23. router SIGKILL ------------------------------------------------------------------


async def _router_kill(stack, cfg, topics, task_queue, temporal, pool, fault, *,
                       events: int, kills: int, seconds: float) -> None:  # fmt: skip
    run = _Run(fault, stack, cfg, topics, task_queue, "23 ordered: router SIGKILL", events)
    await run.seed(pool)
    await run.pipe.spawn("ingress")
    await run.worker()
    # Ledger off, commits 3 s apart: every kill leaves placed, uncommitted triggers, and
    # each re-read one reaches flow_order_assign again (not only those the ledger lost).
    router = await run.pipe.spawn(
        "router", INGEST_ROUTER_LEDGER="false", INGEST_ROUTER_COMMIT_INTERVAL_MS="3000"
    )
    # A restart takes ~10 s (start-up, joining the group): kills land every ~10 s at best.
    producing = run.produce(seconds, hold=0.5)
    placed_at_kills = []
    for kill in range(kills):
        before = await _places(pool)

        async def placing(before: int = before, r: h.Child = router) -> bool:
            r.assert_alive()
            return await _places(pool) > before

        await eventually(placing, 90, "the router to place runs")
        await asyncio.sleep(random.uniform(0.2, 1.0))  # a random point mid-stream
        await router.kill()
        placed_at_kills.append(await _places(pool))
        router = await run.pipe.restart(router)
        run.figures.update(kills=kill + 1, restarts=kill + 1, placed_at_kills=placed_at_kills)
    await producing
    await run.verify(temporal, pool)
    assert placed_at_kills[-1] < events, "every kill should land mid-stream"


@pytest.mark.timeout(h.scaled(300, h.drain_seconds(400) + 900))
async def test_ordered_router_sigkill(stack, cfg, topics, task_queue, temporal, db_pool, fault):
    await _router_kill(stack, cfg, topics, task_queue, temporal, db_pool, fault,
                       events=h.scaled(60, 400), kills=h.scaled(3, 8),
                       seconds=h.scaled(40, 120))  # fmt: skip


# --- 24. worker SIGKILL --------------------------------------------------------------


async def _worker_kill(stack, cfg, topics, task_queue, temporal, pool, fault, *,
                       events: int, kills: int) -> None:  # fmt: skip
    run = _Run(fault, stack, cfg, topics, task_queue, "24 ordered: worker SIGKILL", events)
    await run.seed(pool)
    await run.pipe.spawn("ingress")
    await run.pipe.spawn("router")
    await run.produce(1, hold=0.5)  # all at once: every line has runs waiting
    w = await run.worker()
    killed_at: dict[str, datetime] = {}
    waiting_at_kills = []
    for kill in range(kills):
        name = f"w{run.workers - 1}"

        async def inside_and_waiting(child: h.Child = w, name: str = name) -> bool:
            child.assert_alive()
            inside = await pool.fetchval(
                "SELECT count(*) FROM flow_visits WHERE worker = $1 AND exited_at IS NULL", name
            )
            return inside > 0 and await _waiting(pool) >= 2

        await eventually(inside_and_waiting, 120, "a run inside its task and runs waiting")
        await asyncio.sleep(random.uniform(0.0, 0.4))  # inside the 0.5 s task, mostly
        await w.kill()
        killed_at[name] = await pool.fetchval("SELECT clock_timestamp()")
        waiting_at_kills.append(await _waiting(pool))
        w = await run.worker()
        run.figures.update(kills=kill + 1, restarts=kill + 1, waiting_at_kills=waiting_at_kills)
    await run.verify(temporal, pool, killed_at)


@pytest.mark.timeout(h.scaled(360, h.drain_seconds(240) + 900))
async def test_ordered_worker_sigkill(stack, cfg, topics, task_queue, temporal, db_pool, fault):
    await _worker_kill(stack, cfg, topics, task_queue, temporal, db_pool, fault,
                       events=h.scaled(36, 240), kills=h.scaled(2, 5))  # fmt: skip


# --- 25. two routers: one joins, then the first is SIGKILLed ----------------------------


async def _rebalance(stack, cfg, topics, task_queue, temporal, pool, fault, *,
                     events: int, seconds: float) -> None:  # fmt: skip
    run = _Run(fault, stack, cfg, topics, task_queue, "25 ordered: router joins, one killed",
               events)  # fmt: skip
    await run.seed(pool)
    await run.pipe.spawn("ingress")
    await run.worker()
    first = await run.pipe.spawn("router")
    producing = run.produce(seconds, hold=0.5)

    async def placing(before: int, *routers: h.Child) -> bool:
        for r in routers:
            r.assert_alive()
        return await _places(pool) > before

    await eventually(lambda: placing(0, first), 90, "the first router to place runs")
    second = await run.pipe.spawn("router")  # joins: the group rebalances mid-stream

    async def both_own_partitions() -> bool:
        first.assert_alive()
        second.assert_alive()
        return "assigned [(" in second.logfile.read_text(errors="replace")

    await eventually(both_own_partitions, 90, "the second router to own partitions")
    before = await _places(pool)
    await eventually(lambda: placing(before, first, second), 90, "both routers placing")
    await asyncio.sleep(random.uniform(0.2, 1.0))
    assert not producing.done(), "the kill should land mid-stream"
    await first.kill()  # its partitions move to the second
    run.figures.update(kills=1, restarts=0, placed_at_kill=await _places(pool))
    await producing
    await run.verify(temporal, pool)
    second.assert_alive()


@pytest.mark.timeout(h.scaled(360, h.drain_seconds(400) + 900))
async def test_ordered_two_routers_rebalance(
    stack, cfg, topics, task_queue, temporal, db_pool, fault
):
    await _rebalance(stack, cfg, topics, task_queue, temporal, db_pool, fault,
                     events=h.scaled(60, 400), seconds=h.scaled(30, 100))  # fmt: skip
