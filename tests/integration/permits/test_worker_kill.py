"""A worker (a real ``ingest worker`` process) SIGKILLed while it holds permits: a
new worker finishes every task, and at no instant are more than ``capacity``
handlers inside. Killed handlers never recorded their exit: their visit is taken
to last until after the kill, which only makes the check stricter."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path
from typing import Any

from tests.support import ROOT
from tests.support.runs import event_run, insert_activity, start_run
from tests.support.wait import eventually

from .conftest import declare, peak


async def _spawn(cfg: Any, name: str, log: Path) -> asyncio.subprocess.Process:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "TEMPORAL_ADDRESS": cfg.temporal.address,
        "TEMPORAL_TASK_QUEUE": cfg.temporal.task_queue,
        "DATABASE_URL": cfg.database.url.get_secret_value(),
        "KAFKA_BOOTSTRAP_SERVERS": cfg.kafka.bootstrap_servers,
        "INGEST_METRICS_PORT": "0",
        "INGEST_SHUTDOWN_GRACE_SECONDS": "1",
        "INGEST_TASK_HANDLERS": "tests.integration.permits.handlers",
        "PERMIT_TEST_WORKER": name,
    }
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "app.cli", "worker", cwd=ROOT, env=env,
        stdout=log.open("ab"), stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip


async def test_sigkilled_worker_never_lets_capacity_be_exceeded(
    cfg, temporal, visits_table, tmp_path
):
    pool = visits_table
    resource = await declare(pool, capacity=2, lease=60)
    config = {"hold_seconds": 1.0, "heartbeat_timeout_seconds": 2, "retry_initial_seconds": 0.2}
    activity_id = await insert_activity(
        pool, [{"type": "visit", "count": 6, "permit": {"resource": resource}, "config": config}]
    )
    run = event_run(activity_id)
    log = tmp_path / "workers.log"

    async def two_inside() -> bool:
        n = await pool.fetchval("SELECT count(*) FROM visits WHERE exited_at IS NULL")
        return bool(n == 2)

    w1 = await _spawn(cfg, "w1", log)
    try:
        handle = await start_run(temporal, run, cfg.temporal.task_queue)
        await eventually(two_inside, 60, "two_inside")
    finally:
        w1.send_signal(signal.SIGKILL)
        await w1.wait()
    killed_at = await pool.fetchval("SELECT clock_timestamp()")
    w2 = await _spawn(cfg, "w2", log)
    try:
        result = await asyncio.wait_for(handle.result(), 120)
    finally:
        w2.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(w2.wait(), 30) == 0, log.read_text()[-3000:]

    assert (result.status, result.tasks_succeeded) == ("succeeded", 6)
    assert await peak(pool, open_until=killed_at) <= 2
    rows = await pool.fetch("SELECT task_id, attempt, worker, exited_at FROM visits")
    killed = {r["task_id"] for r in rows if r["worker"] == "w1" and r["exited_at"] is None}
    assert len(killed) == 2
    # The interrupted handlers ran again on w2, under the permit their task still held.
    retried = {r["task_id"] for r in rows if r["worker"] == "w2" and r["attempt"] >= 2}
    assert killed <= retried
