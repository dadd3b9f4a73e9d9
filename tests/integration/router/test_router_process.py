"""``ingest router`` as a real process: SIGKILL before its commit, restart, SIGTERM."""

from __future__ import annotations

import asyncio
import signal
import uuid

from schemas import ids
from tests.support import db, kafka, metrics, wait
from tests.support.net import free_port
from tests.support.process import router_env, spawn_router
from tests.support.temporal import exists


async def test_sigkill_before_commit_duplicates_nothing(cfg, temporal, db_pool):
    aid = await db.seed_activity(db_pool, "k.t")
    tag = uuid.uuid4().hex[:8]
    evs = [f"k-{tag}-{i}" for i in range(40)]
    await kafka.produce(
        cfg.kafka.bootstrap_servers,
        cfg.kafka.events_topic,
        [(e.encode(), db.event("k.t", e), []) for e in evs],
    )
    wids = [ids.event_workflow_id(aid, e) for e in evs]
    group = f"kill-{tag}"
    port = free_port()

    # 1. A router that never reaches its periodic commit: it starts everything, then dies.
    first = await spawn_router(
        router_env(cfg, group, port, INGEST_ROUTER_COMMIT_INTERVAL_MS="3600000")
    )

    async def all_started() -> bool:
        return all([await exists(temporal, wid) for wid in wids])

    await wait.eventually(all_started, 60, "the first router to start every workflow")
    first.send_signal(signal.SIGKILL)
    await first.wait()
    got = await kafka.committed(cfg.kafka.bootstrap_servers, group, cfg.kafka.events_topic)
    assert all(v is None for v in got.values()), f"nothing should be committed: {got}"
    assert await db_pool.fetchval("SELECT count(*) FROM routed_triggers") == 0

    # 2. The restarted router re-reads everything; Temporal absorbs every start.
    port2 = free_port()
    second = await spawn_router(
        router_env(cfg, group, port2, INGEST_ROUTER_COMMIT_INTERVAL_MS="100")
    )
    end = await kafka.end_offsets(cfg.kafka.bootstrap_servers, cfg.kafka.events_topic)

    async def caught_up() -> bool:
        c = await kafka.committed(cfg.kafka.bootstrap_servers, group, cfg.kafka.events_topic)
        return all((c.get(p) or 0) >= off for p, off in end.items())

    await wait.eventually(caught_up, 60, "the restarted router to commit to the end")
    await wait.eventually(lambda: metrics.healthy(port2), 30, "the router's /metrics")
    dups = await metrics.scrape(
        port2, "pipeline_duplicates_suppressed_total", layer="temporal", trigger="event"
    )
    # Nothing started: the family must be exposed, its `event` series may not exist yet.
    started = await metrics.scrape(
        port2, "pipeline_workflows_started_total", missing_ok=True, trigger="event"
    )
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
