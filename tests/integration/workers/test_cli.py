"""``ingest worker`` as a real process: serves a run, exports metrics, stops on SIGTERM.

Run as ``python -m app.commands worker`` (the same parser and code as ``ingest worker``) so
these tests do not depend on the other subcommands importing cleanly.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys

import httpx

from tests.support import ROOT
from tests.support.net import free_port, free_ports
from tests.support.runs import event_run, insert_activity, start_run


def env_for(cfg, **extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "TEMPORAL_ADDRESS": cfg.temporal.address,
        "TEMPORAL_TASK_QUEUE": cfg.temporal.task_queue,
        "DATABASE_URL": cfg.database.url.get_secret_value(),
        "KAFKA_BOOTSTRAP_SERVERS": cfg.kafka.bootstrap_servers,
        "INGEST_METRICS_HOST": "127.0.0.1",
        **extra,
    }


async def get_text(url: str) -> str:
    async with httpx.AsyncClient() as http:
        async with asyncio.timeout(30):
            while True:
                try:
                    resp = await http.get(url)
                    if resp.status_code == 200:
                        return resp.text
                except httpx.TransportError:
                    pass
                await asyncio.sleep(0.2)


async def test_worker_process_runs_workflows_and_stops_on_sigterm(cfg, temporal, db_pool):
    port, sdk_port = free_ports(2)
    proc = await asyncio.create_subprocess_exec(
        *[sys.executable, "-m", "app.commands", "worker", "--metrics-port", str(port)],
        cwd=ROOT,
        env=env_for(cfg, INGEST_SDK_METRICS_PORT=str(sdk_port)),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert "ok" in await get_text(f"http://127.0.0.1:{port}/healthz")
        activity_id = await insert_activity(db_pool, [{"type": "noop"}])
        run = event_run(activity_id)
        handle = await start_run(temporal, run, cfg.temporal.task_queue)
        assert (await asyncio.wait_for(handle.result(), 60)).status == "succeeded"
        metrics = await get_text(f"http://127.0.0.1:{port}/metrics")
        assert 'pipeline_runs_logged_total{result="inserted"} 1.0' in metrics
        assert 'pipeline_task_instances_total{status="succeeded",task_type="noop"} 1.0' in metrics
        assert "temporal_" in await get_text(f"http://127.0.0.1:{sdk_port}/metrics")
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    assert b"worker stopped" in err


def test_unreachable_database_is_one_clear_line_and_exit_1(cfg):
    out = subprocess.run(
        [sys.executable, "-m", "app.commands", "worker", "--metrics-port", "0"],
        cwd=ROOT,
        env=env_for(cfg, DATABASE_URL=f"postgresql://postgres@127.0.0.1:{free_port()}/x"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 1
    assert out.stdout.startswith("ingest worker: cannot reach PostgreSQL at DATABASE_URL=")
    assert len(out.stdout.strip().splitlines()) == 1
    assert "Traceback" not in out.stderr


def test_bad_handler_list_is_a_configuration_error(cfg):
    out = subprocess.run(
        [sys.executable, "-m", "app.commands", "worker", "--handlers", "no_such_mod_q:f"],
        cwd=ROOT,
        env=env_for(cfg),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2
    assert "INGEST_TASK_HANDLERS item 'no_such_mod_q:f': cannot import" in out.stderr
