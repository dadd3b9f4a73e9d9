"""Scenario 3: SIGKILL the worker mid-run, repeatedly; runs complete after a restart.

Each run has three tasks, so a kill lands between ``log_run``, the child task
workflows and ``finish_run``. Temporal retries the lost workflow and activity tasks
on the next worker; the upserts keep one ``activity_runs`` row per run and one
``task_instances`` row per task id.
"""

from __future__ import annotations

import asyncio
import random
import time
import uuid

import pytest

from tests import helpers
from tests.faults import harness as h

N = h.scaled(100, 3000)
KILLS = h.scaled(3, 10)
TASKS = 3
# Short timeouts, so an attempt lost with a killed worker is retried in seconds
# (the default heartbeat timeout is 60 s).
NOOP = {"type": "noop", "config": {"heartbeat_timeout_seconds": 5, "timeout_seconds": 15}}


@pytest.mark.timeout(h.scaled(540, h.drain_seconds(N, TASKS) + 900))
async def test_worker_sigkill_mid_run(stack, cfg, topics, task_queue, temporal, db_pool, tmp_path):
    t0 = time.monotonic()
    etype = f"fault.worker.{uuid.uuid4().hex[:8]}"
    aid = await helpers.seed_activity(db_pool, etype, tasks=[NOOP] * TASKS)
    ep = h.Endpoints(stack.kafka, stack.temporal, cfg.database.url.get_secret_value())
    pipe = h.Pipeline(tmp_path, ep, topics, task_queue)
    produced = h.Produced()
    kills = 0
    try:
        await pipe.spawn("ingress")
        await pipe.spawn("router")
        await h.produce_paced(stack.kafka, topics.raw, N, etype, 1, produced)
        worker = await pipe.spawn("worker")
        for _ in range(KILLS):
            before = await db_pool.fetchval("SELECT count(*) FROM task_instances")

            async def progressed(before: int = before, child: h.Child = worker) -> bool:
                child.assert_alive()
                return await db_pool.fetchval("SELECT count(*) FROM task_instances") > before

            await helpers.eventually(progressed, 120, "the worker to run tasks")
            await asyncio.sleep(random.uniform(0.2, 1.5))
            unfinished = await db_pool.fetchval(
                "SELECT count(*) FROM activity_runs WHERE status <> 'succeeded'"
            )
            done = await db_pool.fetchval(
                "SELECT count(*) FROM activity_runs WHERE status = 'succeeded'"
            )
            assert unfinished > 0 or done < N, "every kill should land mid-run"
            await worker.kill()
            kills += 1
            worker = await pipe.restart(worker)
        expected = h.expected_workflow_ids([aid], topics.raw, produced.coords)
        outcome = await h.verify(
            temporal,
            db_pool,
            task_queue,
            expected,
            TASKS,
            timeout=h.scaled(420, h.drain_seconds(N, TASKS)),
        )
    except BaseException:
        print(pipe.logs())
        raise
    finally:
        await pipe.close()
    h.record(
        "3 worker SIGKILL",
        events=N,
        kills=kills,
        restarts=kills,
        lost=outcome.lost,
        duplicate_runs=outcome.duplicate_runs + outcome.duplicate_executions,
        dlq=0,
        dlq_expected=0,
        runs=outcome.runs,
        seconds=round(time.monotonic() - t0),
        tasks=outcome.tasks,
    )
