"""The wait survives a worker crash: a fix sent after the worker was SIGKILLed and a
new one started still retries the task, and the run succeeds."""

from __future__ import annotations

import asyncio
import signal

from .conftest import wait_listed
from .procs import Proc, env_for


async def test_a_fix_after_the_worker_was_killed_and_restarted_still_works(
    cfg, db_pool, ops_api, paused_task
):
    env = env_for(
        cfg,
        INGEST_TASK_HANDLERS="tests.integration.ops.handlers",
        INGEST_SHUTDOWN_GRACE_SECONDS="2",
    )
    first = await Proc.start(env, "worker")
    try:
        p = await paused_task(amount="ten")
    finally:
        assert await first.stop(signal.SIGKILL) == -signal.SIGKILL
    # Nothing runs the workflow now; it is still paused, in history only.
    assert (
        await db_pool.fetchval("SELECT status FROM task_instances WHERE id = $1", p.task_id)
        == "pending_fix"
    )
    second = await Proc.start(env, "worker")
    try:
        await wait_listed(ops_api, p.activity_id)
        answer = await ops_api.json(
            "POST",
            f"/api/tasks/{p.task_id}/fix",
            as_="after-crash",
            json={"patch": {"amount": 12.5}},
        )
        assert answer["seq"] == 1
        result = await asyncio.wait_for(p.handle.result(), 120)
    finally:
        assert await second.stop() == 0, second.text
    assert (result.status, result.tasks_succeeded) == ("succeeded", 1)
    row = await db_pool.fetchrow(
        "SELECT status, attempts FROM task_instances WHERE id = $1", p.task_id
    )
    assert row["status"] == "succeeded"
    assert (
        await db_pool.fetchval("SELECT actor FROM task_fixes WHERE task_id = $1", p.task_id)
        == "after-crash"
    )
