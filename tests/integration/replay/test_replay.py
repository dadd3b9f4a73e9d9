"""``ingest replay`` against real Kafka, Temporal and PostgreSQL: the ledger closes the
retention hole, dry runs start nothing, time ranges select the right messages."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta

from replay.topic import Replayer, ReplayRange
from router.settings import RouterSettings
from schemas import ids
from tests.support import ROOT, db, kafka
from tests.support.kafka import produce_at
from tests.support.routing import route_until_committed
from tests.support.temporal import exists, forget


async def _produce_events(cfg, event_type: str, n: int) -> list[str]:
    tag = uuid.uuid4().hex[:8]
    evs = [f"rp-{tag}-{i}" for i in range(n)]
    await kafka.produce(
        cfg.kafka.bootstrap_servers,
        cfg.kafka.events_topic,
        [(e.encode(), db.event(event_type, e, n=i), []) for i, e in enumerate(evs)],
    )
    return evs


async def test_ledger_closes_the_retention_hole(cfg, temporal, db_pool):
    aid = await db.seed_activity(db_pool, "order.paid")
    evs = await _produce_events(cfg, "order.paid", 12)
    wids = [ids.event_workflow_id(aid, e) for e in evs]
    group = f"live-{uuid.uuid4().hex[:8]}"
    live = await route_until_committed(
        cfg, RouterSettings(group=group, commit_interval_ms=100), temporal, db_pool
    )
    assert live.routing.stats.started == 12
    before = await kafka.committed(cfg.kafka.bootstrap_servers, group, cfg.kafka.events_topic)

    await forget(temporal, wids)  # what namespace retention does to closed runs

    rng = ReplayRange(topic=cfg.kafka.events_topic, from_offset=0)
    report = await Replayer(cfg, RouterSettings(), client=temporal, pool=db_pool).run(rng)
    assert report.complete
    assert report.stats.read == 12
    assert report.stats.started == 0
    assert report.stats.ledger_duplicates == 12
    assert report.stats.temporal_duplicates == 0
    assert not any([await exists(temporal, w) for w in wids])  # nothing ran a second time
    # The live group's offsets were not touched.
    after = await kafka.committed(cfg.kafka.bootstrap_servers, group, cfg.kafka.events_topic)
    assert after == before

    # Contrast: without the ledger, Temporal no longer knows these ids and starts them again.
    again = await Replayer(cfg, RouterSettings(ledger=False), client=temporal, pool=db_pool).run(
        rng
    )
    assert again.stats.started == 12
    assert again.stats.ledger_duplicates == 0
    assert all([await exists(temporal, w) for w in wids])


async def test_replay_of_new_events_starts_them_and_records_the_ledger(cfg, temporal, db_pool):
    aid = await db.seed_activity(db_pool, "t.new")
    evs = await _produce_events(cfg, "t.new", 8)
    await kafka.produce(
        cfg.kafka.bootstrap_servers,
        cfg.kafka.events_topic,
        [(b"b", b"{bad", []), (b"u", db.event("nobody", "u-1"), [])],
    )
    rng = ReplayRange(topic=cfg.kafka.events_topic, from_offset=0)
    report = await Replayer(cfg, RouterSettings(), client=temporal, pool=db_pool).run(rng)
    assert report.stats.read == 10
    assert report.stats.started == 8
    assert report.stats.dlq == 1 and report.stats.unmatched == 1
    rows = await db_pool.fetch("SELECT workflow_id FROM routed_triggers")
    assert {r["workflow_id"] for r in rows} == {ids.event_workflow_id(aid, e) for e in evs}
    dlq = await kafka.read_all(cfg.kafka.bootstrap_servers, cfg.kafka.dlq_topic)
    assert [m.value for m in dlq] == [b"{bad"]
    assert dict(dlq[0].headers)["dlq_component"] == b"router"
    # Once more: everything is already in the ledger.
    second = await Replayer(cfg, RouterSettings(), client=temporal, pool=db_pool).run(rng)
    assert second.stats.started == 0 and second.stats.ledger_duplicates == 8


async def test_dry_run_starts_nothing(cfg, temporal, db_pool):
    aid = await db.seed_activity(db_pool, "t.dry")
    evs = await _produce_events(cfg, "t.dry", 10)
    await kafka.produce(
        cfg.kafka.bootstrap_servers, cfg.kafka.events_topic, [(b"x", b"not json", [])]
    )
    rng = ReplayRange(topic=cfg.kafka.events_topic, from_offset=0)
    report = await Replayer(cfg, RouterSettings(), client=temporal, pool=db_pool, dry_run=True).run(
        rng
    )
    assert report.stats.read == 11
    assert report.stats.would_start == 10
    assert report.stats.started == 0
    assert report.stats.dlq == 1
    assert not any([await exists(temporal, ids.event_workflow_id(aid, e)) for e in evs])
    assert await db_pool.fetchval("SELECT count(*) FROM routed_triggers") == 0
    assert await kafka.read_all(cfg.kafka.bootstrap_servers, cfg.kafka.dlq_topic, 500) == []


async def test_from_time_and_to_time_select_the_window(cfg, temporal, db_pool):
    await db.seed_activity(db_pool, "t.time")
    now = int(time.time() * 1000)
    hour = 3_600_000
    items = []
    for label, ts in (("old", now - 3 * hour), ("mid", now - 2 * hour), ("new", now - hour)):
        for i in range(4):
            eid = f"{label}-{uuid.uuid4().hex[:6]}-{i}"
            items.append((eid.encode(), db.event("t.time", eid), ts))
    await produce_at(cfg.kafka.bootstrap_servers, cfg.kafka.events_topic, items)

    def at(ms: int) -> datetime:
        return datetime.fromtimestamp(ms / 1000, UTC)

    replayer = Replayer(cfg, RouterSettings(), client=temporal, pool=db_pool, dry_run=True)
    since_mid = await replayer.run(
        ReplayRange(topic=cfg.kafka.events_topic, from_time=at(now - 2 * hour - 60_000))
    )
    assert since_mid.stats.read == 8
    window = await replayer.run(
        ReplayRange(
            topic=cfg.kafka.events_topic,
            from_time=at(now - 2 * hour - 60_000),
            to_time=at(now - hour - 60_000),
        )
    )
    assert window.stats.read == 4
    future = await replayer.run(
        ReplayRange(topic=cfg.kafka.events_topic, from_time=datetime.now(UTC) + timedelta(hours=1))
    )
    assert future.stats.read == 0 and future.complete


async def test_cli_json_summary_parses(cfg, temporal, db_pool):
    await db.seed_activity(db_pool, "t.cli")
    await _produce_events(cfg, "t.cli", 6)
    env = {
        **os.environ,
        "KAFKA_BOOTSTRAP_SERVERS": cfg.kafka.bootstrap_servers,
        "KAFKA_DLQ_TOPIC": cfg.kafka.dlq_topic,
        "TEMPORAL_ADDRESS": cfg.temporal.address,
        "TEMPORAL_TASK_QUEUE": cfg.temporal.task_queue,
        "DATABASE_URL": cfg.database.url.get_secret_value(),
    }
    args = [sys.executable, "-m", "app.commands", "replay", "--topic", cfg.kafka.events_topic]
    proc = await asyncio.create_subprocess_exec(
        *args, "--from-offset", "0", "--json", "--dry-run",
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, err.decode()
    summary = json.loads(out)
    assert summary["read"] == 6 and summary["would_start"] == 6 and summary["started"] == 0
    assert summary["dry_run"] is True and summary["complete"] is True
    assert set(summary["partitions"]) == {"0", "1", "2"}

    proc = await asyncio.create_subprocess_exec(
        *args, "--from-offset", "0", "--partitions", "0,7", "--json",
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 2 and b"not [7]" in err
