"""``ingest router`` as a real process: SIGKILL before its commit, restart, SIGTERM."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
import uuid
from typing import Any

import httpx

from schemas import ids
from tests import helpers
from tests.conftest import ROOT


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(cfg: Any, group: str, port: int, **extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "KAFKA_BOOTSTRAP_SERVERS": cfg.kafka.bootstrap_servers,
        "KAFKA_EVENTS_TOPIC": cfg.kafka.events_topic,
        "KAFKA_DLQ_TOPIC": cfg.kafka.dlq_topic,
        "TEMPORAL_ADDRESS": cfg.temporal.address,
        "TEMPORAL_TASK_QUEUE": cfg.temporal.task_queue,
        "DATABASE_URL": cfg.database.url.get_secret_value(),
        "INGEST_ROUTER_GROUP": group,
        "INGEST_METRICS_PORT": str(port),
        **extra,
    }


async def _spawn(env: dict[str, str]) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "pipeline.cli",
        "router",
        cwd=ROOT,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )


async def _listening(port: int) -> bool:
    try:
        async with httpx.AsyncClient() as http:
            return (
                await http.get(f"http://127.0.0.1:{port}/healthz", timeout=2)
            ).status_code == 200
    except httpx.HTTPError:
        return False


async def _metric(port: int, name: str, **labels: str) -> float:
    async with httpx.AsyncClient() as http:
        text = (await http.get(f"http://127.0.0.1:{port}/metrics", timeout=5)).text
    for line in text.splitlines():
        if line.startswith(f"{name}{{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


async def test_sigkill_before_commit_duplicates_nothing(cfg, temporal, db_pool):
    aid = await helpers.seed_activity(db_pool, "k.t")
    tag = uuid.uuid4().hex[:8]
    evs = [f"k-{tag}-{i}" for i in range(40)]
    await helpers.produce(
        cfg.kafka.bootstrap_servers,
        cfg.kafka.events_topic,
        [(e.encode(), helpers.event("k.t", e), []) for e in evs],
    )
    wids = [ids.event_workflow_id(aid, e) for e in evs]
    group = f"kill-{tag}"
    port = _free_port()

    # 1. A router that never reaches its periodic commit: it starts everything, then dies.
    first = await _spawn(_env(cfg, group, port, INGEST_ROUTER_COMMIT_INTERVAL_MS="3600000"))

    async def all_started() -> bool:
        for wid in wids:
            try:
                await temporal.get_workflow_handle(wid).describe()
            except Exception:
                return False
        return True

    await helpers.eventually(all_started, 60, "the first router to start every workflow")
    first.send_signal(signal.SIGKILL)
    await first.wait()
    got = await helpers.committed(cfg.kafka.bootstrap_servers, group, cfg.kafka.events_topic)
    assert all(v is None for v in got.values()), f"nothing should be committed: {got}"
    assert await db_pool.fetchval("SELECT count(*) FROM routed_triggers") == 0

    # 2. The restarted router re-reads everything; Temporal absorbs every start.
    port2 = _free_port()
    second = await _spawn(_env(cfg, group, port2, INGEST_ROUTER_COMMIT_INTERVAL_MS="100"))
    end = await helpers.end_offsets(cfg.kafka.bootstrap_servers, cfg.kafka.events_topic)

    async def caught_up() -> bool:
        c = await helpers.committed(cfg.kafka.bootstrap_servers, group, cfg.kafka.events_topic)
        return all((c.get(p) or 0) >= off for p, off in end.items())

    await helpers.eventually(caught_up, 60, "the restarted router to commit to the end")
    await helpers.eventually(lambda: _listening(port2), 30, "the router's /metrics")
    dups = await _metric(
        port2, "pipeline_duplicates_suppressed_total", layer="temporal", trigger="event"
    )
    started = await _metric(port2, "pipeline_workflows_started_total", trigger="event")
    assert dups == len(evs)
    assert started == 0
    # Exactly one execution per workflow id.
    for wid in wids[:5]:
        runs = [w async for w in temporal.list_workflows(f"WorkflowId = '{wid}'")]
        assert len(runs) == 1, wid
    assert await db_pool.fetchval("SELECT count(*) FROM routed_triggers") == len(evs)

    # 3. SIGTERM: drains, commits, exits 0.
    second.send_signal(signal.SIGTERM)
    out, _ = await asyncio.wait_for(second.communicate(), 40)
    assert second.returncode == 0, out.decode()[-2000:]
    assert b"router stopped" in out
