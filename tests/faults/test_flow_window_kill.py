"""Scenario 20: the router and the worker SIGKILLed while events are batched.

An activity with ``batch: {max_size: 10, timeout: 1s}``; id-less events flow through
real ingress, router and worker processes while both router and worker are killed
and restarted mid-stream (events assigned to open batches, batches closing, runs
starting). Then the invariant of windows: every event is a member of exactly one
batch (0 lost, 0 in two batches), no batch holds more than 10, every batch started
exactly one run whose id is ``schemas.ids.batch_workflow_id`` of its members, and
no other run exists (0 extra), in ``activity_runs`` and in Temporal.
"""

from __future__ import annotations

import asyncio
import random
import uuid
from collections import Counter
from typing import Any

import pytest

from schemas import ids
from tests.faults import harness as h
from tests.integration.flow.support import seed_flow_activity
from tests.support.wait import eventually, quiet

MAX_SIZE = 10
FLOW = {"batch": {"max_size": MAX_SIZE, "timeout": "1s"}}
# Produced in bursts of 15, more than the timeout apart: each burst fills one batch (closed
# by count in the router) and leaves 5 for one closed by its timeout (in the worker).
BURST = 15


async def _members(pool: Any, aid: str) -> list[Any]:
    return list(
        await pool.fetch(
            "SELECT m.event_id, w.id, w.state, w.run_workflow_id FROM flow_members m"
            " JOIN flow_windows w ON w.id = m.window_id WHERE m.activity_id = $1::uuid",
            aid,
        )
    )


async def _scenario(
    stack: Any, cfg: Any, topics: Any, task_queue: str, temporal: Any, pool: Any, fault: Any,
    *, events: int, kills: int, produce_seconds: float,
) -> None:  # fmt: skip
    etype = f"fault.batch.{uuid.uuid4().hex[:8]}"
    aid = await seed_flow_activity(pool, etype, FLOW)
    ep = h.Endpoints(stack.kafka, stack.temporal, cfg.database.url.get_secret_value())
    pipe = fault.pipeline(ep, topics, task_queue)
    figures = fault.figures("20 router+worker SIGKILL, batched", events=events, dlq=0)
    produced = h.Produced()
    await pipe.spawn("ingress")
    worker = await pipe.spawn("worker", metrics=True)
    router = await pipe.spawn("router", metrics=True)
    # Both polling before the stream starts: otherwise every batch fills up while the
    # worker is still starting, and no batch would close by its timeout.
    for child in (worker, router):
        await eventually(child.ready, 90, f"the {child.kind} to be ready")
    producing = asyncio.create_task(
        h.produce_paced(stack.kafka, topics.raw, events, etype, produce_seconds, produced, BURST)
    )
    for kill in range(kills):
        before = len(await _members(pool, aid))

        async def progressed(before: int = before, r: h.Child = router) -> bool:
            r.assert_alive()
            return len(await _members(pool, aid)) > before

        await eventually(progressed, 90, "the router to batch something")
        await asyncio.sleep(random.uniform(0.2, 1.5))
        await asyncio.gather(router.kill(), worker.kill())
        router, worker = await pipe.restart(router), await pipe.restart(worker)
        figures.update(kills=2 * (kill + 1), restarts=2 * (kill + 1))
    placed_at_last_kill = len(await _members(pool, aid))
    await producing
    expected = {ids.source_event_id(topics.raw, p, o) for p, o in produced.coords}

    async def settled() -> tuple[int, int, int]:
        rows = await _members(pool, aid)
        runs = await pool.fetchval("SELECT count(*) FROM activity_runs WHERE status = 'succeeded'")
        return len(rows), sum(r["state"] == "started" for r in rows), int(runs)

    async def all_done() -> bool:
        n, started, runs = await settled()
        windows = await pool.fetchval("SELECT count(*) FROM flow_windows")
        return n >= len(expected) and started == n and runs >= windows

    await eventually(
        all_done, h.scaled(240, h.drain_seconds(events // MAX_SIZE) + 300), "every batch run"
    )
    await quiet(settled, "members, started members and finished runs", period=3.0)
    rows = await _members(pool, aid)
    per_event = Counter(r["event_id"] for r in rows)
    by_window: dict[int, list[str]] = {}
    run_of: dict[int, str] = {}
    for r in rows:
        by_window.setdefault(r["id"], []).append(r["event_id"])
        run_of[r["id"]] = r["run_workflow_id"]
    batch_ids = {ids.batch_workflow_id(aid, m) for m in by_window.values()}
    runs = Counter(
        r["workflow_id"] for r in await pool.fetch("SELECT workflow_id FROM activity_runs")
    )
    execs = await h.executions_by_id(temporal, task_queue)
    lost = expected - set(per_event)
    extra_runs = (set(runs) - batch_ids) | (set(execs) - batch_ids)
    dup_runs = [w for w, n in (runs + execs).items() if n > 2]
    closed_by = Counter(
        r["closed_by"] for r in await pool.fetch(
            "SELECT closed_by FROM flow_windows WHERE activity_id = $1::uuid", aid
        )
    )  # fmt: skip
    figures.update(
        full=closed_by["full"],
        timeout=closed_by["timeout"],
        lost=len(lost),
        duplicate_runs=len(dup_runs),
        runs=len(runs),
        batches=len(by_window),
        placed_at_last_kill=placed_at_last_kill,
    )
    assert not lost, f"{len(lost)} events in no batch, e.g. {sorted(lost)[:3]}"
    assert set(per_event) == expected, "members that are not produced events"
    assert all(n <= MAX_SIZE for n in map(len, by_window.values()))
    assert all(run_of[w] == ids.batch_workflow_id(aid, m) for w, m in by_window.items())
    assert set(runs) == batch_ids and set(execs) >= batch_ids, "a batch without its run"
    assert not extra_runs, f"runs of no batch: {sorted(extra_runs)[:3]}"
    assert (
        not dup_runs and all(n == 1 for n in runs.values()) and all(n == 1 for n in execs.values())
    )
    assert placed_at_last_kill < events, "every kill should land mid-stream"
    # Every batch closed by count or by its timeout. How many by each depends on how long
    # the killed worker takes to come back (the figures row shows it): a batch waiting on a
    # dead worker's timer may fill up meanwhile, which is correct too.
    assert closed_by["full"] + closed_by["timeout"] == len(by_window), closed_by
    await pipe.committed_to_end("router", 60)


@pytest.mark.timeout(360)
async def test_router_and_worker_sigkill_while_batching(
    stack, cfg, topics, task_queue, temporal, db_pool, fault
):
    await _scenario(
        stack, cfg, topics, task_queue, temporal, db_pool, fault,
        events=150, kills=1, produce_seconds=30,
    )  # fmt: skip


@pytest.mark.slow
@pytest.mark.timeout(h.drain_seconds(100) + 900)
async def test_router_and_worker_sigkill_while_batching_full_size(
    stack, cfg, topics, task_queue, temporal, db_pool, fault
):
    size = h.FULL_SIZES["flow_window_kill"]
    await _scenario(
        stack, cfg, topics, task_queue, temporal, db_pool, fault,
        events=size.runs * MAX_SIZE, kills=6, produce_seconds=120,
    )  # fmt: skip
