"""Scenario 3: SIGKILL the worker mid-run, repeatedly; runs complete after a restart.

Each run has three tasks, so a kill lands between ``log_run``, the child task
workflows and ``finish_run``. Temporal retries the lost workflow and activity tasks
on the next worker; the upserts keep one ``activity_runs`` row per run and one
``task_instances`` row per task id.
"""

from __future__ import annotations

import asyncio
import random
import uuid

import pytest

from tests.faults import harness as h
from tests.support import db
from tests.support.wait import eventually

N = h.events("worker_kill", 100)
KILLS = h.scaled(3, 10)
TASKS = h.FULL_SIZES["worker_kill"].tasks_per_run
# Short timeouts, so an attempt lost with a killed worker is retried in seconds
# (the default heartbeat timeout is 60 s).
NOOP = {"type": "noop", "config": {"heartbeat_timeout_seconds": 5, "timeout_seconds": 15}}


@pytest.mark.timeout(h.scaled(540, h.drain_seconds(N, TASKS) + 900))
async def test_worker_sigkill_mid_run(stack, cfg, topics, task_queue, temporal, db_pool, fault):
    etype = f"fault.worker.{uuid.uuid4().hex[:8]}"
    aid = await db.seed_activity(db_pool, etype, tasks=[NOOP] * TASKS)
    ep = h.Endpoints(stack.kafka, stack.temporal, cfg.database.url.get_secret_value())
    pipe = fault.pipeline(ep, topics, task_queue)
    figures = fault.figures("3 worker SIGKILL", events=N, dlq=0, dlq_expected=0)
    produced = h.Produced()
    await pipe.spawn("ingress")
    await pipe.spawn("router")
    await h.produce_paced(stack.kafka, topics.raw, N, etype, 1, produced)
    worker = await pipe.spawn("worker")
    mid_run = []
    for kill in range(KILLS):
        before = await db_pool.fetchval("SELECT count(*) FROM task_instances")

        async def progressed(before: int = before, child: h.Child = worker) -> bool:
            child.assert_alive()
            return await db_pool.fetchval("SELECT count(*) FROM task_instances") > before

        await eventually(progressed, 120, "the worker to run tasks")
        await asyncio.sleep(random.uniform(0.2, 1.5))  # a random point mid-run
        done = await db_pool.fetchval(
            "SELECT count(*) FROM activity_runs WHERE status = 'succeeded'"
        )
        mid_run.append(done < N)
        await worker.kill()
        worker = await pipe.restart(worker)
        figures.update(kills=kill + 1, restarts=kill + 1)
    expected = h.expected_workflow_ids([aid], topics.raw, produced.coords)
    outcome = await pipe.verify(
        temporal, db_pool, expected, figures, tasks_per_run=TASKS, reduced_timeout=420
    )
    figures.update(tasks=outcome.tasks)
    assert all(mid_run), f"every kill should land mid-run: {mid_run}"
