"""GET /api/dlq peeks without committing; POST /api/replay (a dry run by default)
returns the same report as ``ingest replay --json``."""

from __future__ import annotations

import json

from aiokafka import TopicPartition

from pipeline import kafka
from replay.session import topic_partitions
from tests.support.db import event, seed_activity
from tests.support.kafka import produce

from .procs import Proc, env_for


async def test_dlq_peek_by_reason_commits_nothing(cfg, ops_api):
    headers = [[("dlq_reason", r.encode()), ("dlq_detail", b"d")] for r in ("a", "b", "a")]
    await produce(
        cfg.kafka.bootstrap_servers,
        cfg.kafka.dlq_topic,
        [(None, f"v{i}".encode(), h) for i, h in enumerate(headers)],
    )
    body = await ops_api.json("GET", "/api/dlq", params={"reason": "a", "limit": 10})
    assert (body["scanned"], body["by_reason"]) == (3, {"a": 2, "b": 1})
    assert sorted(m["value"] for m in body["messages"]) == ["v0", "v2"]
    assert {m["reason"] for m in body["messages"]} == {"a"}
    consumer = kafka.consumer(cfg.kafka, group_id="ingest-dlq-replay")
    await consumer.start()
    try:  # the re-drive group never moved
        parts = await topic_partitions(consumer, cfg.kafka.dlq_topic)
        assert len(parts) == cfg.kafka.partitions
        for p in parts:
            assert await consumer.committed(TopicPartition(cfg.kafka.dlq_topic, p)) is None
    finally:
        await consumer.stop()


async def test_replay_dry_run_is_the_default_and_matches_the_cli_report(cfg, db_pool, ops_api):
    await seed_activity(db_pool, "ops.replay.test")
    await produce(
        cfg.kafka.bootstrap_servers,
        cfg.kafka.events_topic,
        [(None, event("ops.replay.test", f"e-{i}"), []) for i in range(3)],
    )
    api = await ops_api.json("POST", "/api/replay", json={"from_offset": 0})
    cli = await Proc.start(env_for(cfg), "replay", "--from-offset", "0", "--dry-run", "--json")
    assert await cli.stop(None) == 0, cli.text
    report = json.loads(cli.text.strip().splitlines()[-1])
    for timing in ("elapsed_seconds", "rate_per_second"):
        api.pop(timing), report.pop(timing)
    assert api == report
    assert (api["dry_run"], api["read"], api["would_start"], api["started"]) == (True, 3, 3, 0)
    assert await db_pool.fetchval("SELECT count(*) FROM activity_runs") == 0
