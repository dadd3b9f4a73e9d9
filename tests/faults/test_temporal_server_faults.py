"""Scenarios 14-16: faults of the real Temporal server, in its split shape.

Each test starts a PRIVATE real server (``tests.support.temporal_server``): frontend,
matching, worker and two history processes, 4 shards, on free ports and databases of
its own, so the shared stack is never touched. The pipeline (ingress, router, worker
subprocesses) runs against it while paced events flow, and the invariant of every
fault scenario must hold afterwards: every trigger has exactly one run, none is lost.

* 14: SIGKILL one of the two history processes. Its shards move to the other one
  once membership drops the dead host (about 5 s, a fixed default of its library).
* 15: SIGKILL the frontend, and start it again 5 s later.
* 16: stop the server's PostgreSQL (a private one) for ``OUTAGE`` seconds.

Each also reports ``stall_s``: the longest time without a new run starting
(``activity_runs.started_at``, written by the worker's first step) from the fault on,
against ``gap_before_s``, the longest such gap while the same stream flowed before it.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
import uuid

import asyncpg
import pytest
from devstack.postgres import Postgres
from devstack.settings import StackSettings
from devstack.temporal_server import TemporalServer
from temporalio.client import Client

from tests.faults import harness as h
from tests.support import db
from tests.support.net import free_port
from tests.support.temporal_server import discard, private_server
from tests.support.wait import eventually

N_HISTORY = h.events("server_history_kill", 200)
N_FRONTEND = h.events("server_frontend_kill", 200)
N_PG = h.events("server_postgres_outage", 200)
PRODUCE_SECONDS = h.scaled(30, 90)
OUTAGE = h.scaled(10, 30)
NAMESPACE = "default"  # the private server's own namespace, registered by ensure()


async def _gaps(pool: asyncpg.Pool, fault_at: object) -> tuple[float, float]:
    """(longest gap between run starts before the fault, longest from the fault on)."""
    rows = await pool.fetch("SELECT started_at FROM activity_runs ORDER BY started_at")
    times = [r["started_at"] for r in rows]
    before = [b - a for a, b in itertools.pairwise(times) if b <= fault_at]
    after = [fault_at, *[t for t in times if t > fault_at]]
    stall = [b - a for a, b in itertools.pairwise(after)]
    secs = [max(g).total_seconds() if g else 0.0 for g in (before, stall)]
    return round(secs[0], 1), round(secs[1], 1)


async def _run_scenario(
    stack, cfg, topics, task_queue, db_pool, fault, *, title: str, n: int, server, inject
) -> None:
    """Start ``server``, drive ``n`` events through the pipeline, ``inject`` the fault
    once 20 % of the runs started, then check the invariant and record the figures."""
    await asyncio.to_thread(server.ensure)
    etype = f"fault.server.{uuid.uuid4().hex[:8]}"
    aid = await db.seed_activity(db_pool, etype)
    ep = h.Endpoints(stack.kafka, server.address, cfg.database.url.get_secret_value())
    pipe = fault.pipeline(ep, topics, task_queue)
    figures = fault.figures(title, events=n, kills=0, dlq=0, dlq_expected=0)
    produced = h.Produced()
    extra = {"TEMPORAL_NAMESPACE": NAMESPACE}
    await pipe.spawn("ingress", **extra)
    worker = await pipe.spawn("worker", **extra)
    router = await pipe.spawn("router", **extra)
    producing = asyncio.create_task(
        h.produce_paced(stack.kafka, topics.raw, n, etype, PRODUCE_SECONDS, produced)
    )

    async def progressed() -> bool:
        router.assert_alive()
        worker.assert_alive()
        return await db_pool.fetchval("SELECT count(*) FROM activity_runs") >= n // 5

    await eventually(progressed, 240, "20 % of the runs to start")
    fault_at = await db_pool.fetchval("SELECT now()")
    figures.update(**await inject())
    assert not producing.done(), "the fault should happen while events flow"
    await producing
    temporal = await Client.connect(server.address, namespace=NAMESPACE)
    expected = h.expected_workflow_ids([aid], topics.raw, produced.coords)
    try:
        await pipe.verify(temporal, db_pool, expected, figures, reduced_timeout=360)
    finally:
        before, stall = await _gaps(db_pool, fault_at)
        figures.update(stall_s=stall, gap_before_s=before)
    await pipe.committed_to_end("router", 60)
    router.assert_alive()
    worker.assert_alive()


def _pid(server: TemporalServer, name: str) -> int:
    proc = next(p for sp, p in server.procs() if sp.name == name)
    pid = proc.pid()
    assert pid is not None, f"{name} is not running"
    return pid


@pytest.mark.timeout(h.scaled(600, h.drain_seconds(N_HISTORY) + 900))
async def test_history_host_sigkill(stack, cfg, topics, task_queue, db_pool, fault):
    server = private_server(fault.tmp / "tserver")
    fault.cleanup(lambda: discard(server, stack.admin_db_url))

    async def kill_history() -> dict[str, object]:
        os.kill(_pid(server, "temporal-history-1"), signal.SIGKILL)
        return {"kills": 1}

    await _run_scenario(
        stack, cfg, topics, task_queue, db_pool, fault,
        title="14 real server: history host SIGKILL", n=N_HISTORY, server=server,
        inject=kill_history,
    )  # fmt: skip
    # The survivor serves every shard: the dead host stayed dead throughout.
    assert next(p for sp, p in server.procs() if sp.name == "temporal-history-1").pid() is None


@pytest.mark.timeout(h.scaled(600, h.drain_seconds(N_FRONTEND) + 900))
async def test_frontend_sigkill_and_restart(stack, cfg, topics, task_queue, db_pool, fault):
    server = private_server(fault.tmp / "tserver")
    fault.cleanup(lambda: discard(server, stack.admin_db_url))

    async def kill_frontend() -> dict[str, object]:
        os.kill(_pid(server, "temporal-frontend"), signal.SIGKILL)
        await asyncio.sleep(5)
        await asyncio.to_thread(server.ensure)  # starts what is not running: the frontend
        return {"kills": 1, "restarts": 1}

    await _run_scenario(
        stack, cfg, topics, task_queue, db_pool, fault,
        title="15 real server: frontend SIGKILL + restart", n=N_FRONTEND, server=server,
        inject=kill_frontend,
    )  # fmt: skip


@pytest.mark.timeout(h.scaled(600, h.drain_seconds(N_PG) + 900))
async def test_postgres_outage_under_the_server(
    stack, cfg, topics, task_queue, db_pool, fault, monkeypatch
):
    monkeypatch.delenv("DATABASE_URL", raising=False)  # Postgres.url would use it
    pg = Postgres(StackSettings(dir=fault.server_dir("pg"), pg_port=free_port()))
    await asyncio.to_thread(pg.ensure)
    fault.cleanup(lambda: asyncio.to_thread(pg.stop))
    server = private_server(fault.tmp / "tserver", pg_port=pg.cfg.pg_port)
    fault.cleanup(lambda: asyncio.to_thread(server.stop))  # its databases go with pg

    async def outage() -> dict[str, object]:
        await asyncio.to_thread(pg.stop)
        await asyncio.sleep(OUTAGE)
        await asyncio.to_thread(pg.ensure)
        return {"restarts": 1}

    await _run_scenario(
        stack, cfg, topics, task_queue, db_pool, fault,
        title=f"16 real server: its PostgreSQL down {OUTAGE} s", n=N_PG, server=server,
        inject=outage,
    )  # fmt: skip
    for sp, proc in server.procs():
        assert proc.pid() is not None, f"{sp.name} died during the PostgreSQL outage"
