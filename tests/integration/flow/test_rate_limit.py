"""rate_limit through the live router, then ``ingest replay`` of the same events: the
excess is skipped, recorded and counted; the replay skips the same triggers again."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid

from router.settings import RouterSettings
from tests.support import ROOT, db, metrics
from tests.support.routing import route_until_committed

from .gate_support import produce, wids

# limit 5 per 60 s: a burst of 20 routed within T = 12 s lets exactly 5 through.
N, LIMIT = 20, 5


async def test_excess_is_skipped_recorded_and_skipped_again_on_replay(cfg, temporal, db_pool):
    etype = f"rl.{uuid.uuid4().hex[:8]}"
    aid = await db.seed_activity(
        db_pool, etype, flow={"rate_limit": {"limit": LIMIT, "period": "60s"}}
    )
    evs = await produce(cfg, etype, N)
    skipped_before = metrics.metric_value(
        "pipeline_flow_runs_skipped_total", missing_ok=True, activity=aid, reason="rate_limit"
    )
    live = await route_until_committed(
        cfg,
        RouterSettings(group=f"rl-{uuid.uuid4().hex[:8]}", commit_interval_ms=100),
        temporal,
        db_pool,
    )
    assert (live.routing.stats.started, live.routing.stats.skipped) == (LIMIT, N - LIMIT)
    skips = await db_pool.fetch(
        "SELECT workflow_id, reason, event_id, key FROM flow_decisions"
        " WHERE activity_id = $1::uuid AND outcome = 'skip'",
        aid,
    )
    assert len(skips) == N - LIMIT
    assert {r["reason"] for r in skips} == {"rate_limit"}
    assert {r["event_id"] for r in skips} <= set(evs)
    started = set(
        await db_pool.fetch(
            "SELECT workflow_id FROM routed_triggers WHERE activity_id = $1::uuid", aid
        )
    )
    assert len(started) == LIMIT
    assert {r["workflow_id"] for r in skips}.isdisjoint({r["workflow_id"] for r in started})
    assert {r["workflow_id"] for r in skips} | {r["workflow_id"] for r in started} == set(
        wids(aid, evs)
    )
    assert (
        metrics.metric_value("pipeline_flow_runs_skipped_total", activity=aid, reason="rate_limit")
        - skipped_before
        == N - LIMIT
    )

    # `ingest replay` of the same range, as an operator runs it (ledger off, so every
    # trigger reaches the gate): the same 15 are skipped and reported as skipped.
    env = {
        **os.environ,
        "KAFKA_BOOTSTRAP_SERVERS": cfg.kafka.bootstrap_servers,
        "KAFKA_DLQ_TOPIC": cfg.kafka.dlq_topic,
        "TEMPORAL_ADDRESS": cfg.temporal.address,
        "TEMPORAL_TASK_QUEUE": cfg.temporal.task_queue,
        "DATABASE_URL": cfg.database.url.get_secret_value(),
    }
    args = ["--topic", cfg.kafka.events_topic, "--from-offset", "0", "--no-ledger", "--json"]
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "app.commands", "replay", *args,
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, err.decode()
    report = json.loads(out)
    assert report["skipped"] == N - LIMIT
    assert report["already_started_temporal"] == LIMIT and report["started"] == 0
    assert (
        await db_pool.fetchval(
            "SELECT count(*) FROM flow_decisions WHERE activity_id = $1::uuid AND outcome = 'skip'",
            aid,
        )
        == N - LIMIT
    )
