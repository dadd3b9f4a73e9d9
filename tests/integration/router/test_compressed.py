"""The router and a topic replay read batches that a compressing producer wrote.

The project's own producer with ``KAFKA_COMPRESSION_TYPE`` set (as a compressing ingress
writes the events topic) publishes events; the router starts one run per event, and a
replay of the topic reads every one of them again and starts nothing new; a DLQ re-drive
reads a compressed DLQ. The broker's
log sizes show the batches really are compressed. A router without the codec libraries
exits 1 with one line naming the batch, and commits nothing past it; a replay exits 2 with
the same line.
"""

from __future__ import annotations

import asyncio
import sys
import uuid

import pytest
from devstack.kafka import Kafka
from devstack.settings import StackSettings

from ingress.records import restamper
from ingress.settings import load_ingress_settings
from pipeline import kafka as pipeline_kafka
from pipeline.settings import KafkaSettings, build
from replay.dlq import DlqRedriver
from replay.topic import Replayer, ReplayRange
from router.settings import RouterSettings
from schemas import ids
from tests.support import ROOT, db, kafka, routing
from tests.support import temporal as tsupport
from tests.support.process import hide_codecs, router_env, spawn_router

N = 20


async def publish(
    cfg: KafkaSettings,
    topic: str,
    values: list[tuple[bytes, bytes]],
    headers: list[tuple[str, bytes]] | None = None,
) -> None:
    """``values`` (key, value) through the project's own producer built from ``cfg``."""
    producer = pipeline_kafka.producer(cfg)
    await producer.start()
    try:
        futs = [await producer.send(topic, v, key=k, headers=headers) for k, v in values]
        for f in futs:
            await f
    finally:
        await producer.stop()


@pytest.mark.parametrize("codec", ["lz4", "zstd"])
async def test_router_and_replay_read_batches_a_compressing_producer_wrote(
    cfg, topics, temporal, db_pool, codec
):
    activity = await db.seed_activity(db_pool, "t")
    tag = uuid.uuid4().hex[:8]
    events = [f"{codec}-{tag}-{i}" for i in range(N)]
    values = [(e.encode(), db.event("t", e, pad="x" * 200)) for e in events]
    bootstrap = cfg.kafka.bootstrap_servers
    packed = build(KafkaSettings, bootstrap_servers=bootstrap, compression_type=codec)
    await publish(packed, cfg.kafka.events_topic, values)
    await publish(build(KafkaSettings, bootstrap_servers=bootstrap), topics.out, values)
    broker = Kafka(StackSettings(dir=ROOT / ".stack"))
    assert broker.log_size(cfg.kafka.events_topic, bootstrap) < broker.log_size(
        topics.out, bootstrap
    )

    rcfg = RouterSettings(group=f"g-{tag}", commit_interval_ms=100)
    router = await routing.route_until_committed(cfg, rcfg, temporal, db_pool)
    expected = {ids.event_workflow_id(activity, e) for e in events}
    assert router.routing.stats.started == len(expected)
    for wid in expected:
        assert await tsupport.exists(temporal, wid), wid

    rng = ReplayRange(topic=cfg.kafka.events_topic, from_offset=0)
    report = await Replayer(cfg, RouterSettings(), client=temporal, pool=db_pool).run(rng)
    assert report.complete
    assert report.stats.read == N and report.stats.started == 0


async def test_dlq_redrive_reads_a_dlq_a_compressing_producer_wrote(cfg, temporal, db_pool):
    activity = await db.seed_activity(db_pool, "t")
    tag = uuid.uuid4().hex[:8]
    events = [f"dlq-{tag}-{i}" for i in range(5)]
    values = [(e.encode(), db.event("t", e)) for e in events]
    # As the router dead-letters a start it gave up on, with its producer compressing zstd.
    packed = build(
        KafkaSettings, bootstrap_servers=cfg.kafka.bootstrap_servers, compression_type="zstd"
    )
    headers = [("dlq_reason", b"start_failed"), ("dlq_component", b"router")]
    await publish(packed, cfg.kafka.dlq_topic, values, headers)

    report = await DlqRedriver(
        cfg,
        RouterSettings(),
        client=temporal,
        pool=db_pool,
        restamp=restamper(cfg.kafka, load_ingress_settings),
        group=f"dlq-{tag}",
    ).run()
    assert report.complete and report.extra["dlq_read"] == len(events)
    assert report.stats.started == len(events)
    for e in events:
        assert await tsupport.exists(temporal, ids.event_workflow_id(activity, e)), e


async def test_a_router_without_the_codec_exits_1_with_one_line_and_commits_nothing(
    cfg, db_pool, tmp_path
):
    await db.seed_activity(db_pool, "t")
    bootstrap, topic = cfg.kafka.bootstrap_servers, cfg.kafka.events_topic
    values = [db.event("t", f"z-{uuid.uuid4().hex[:8]}-{i}") for i in range(3)]
    kafka.produce_librdkafka(bootstrap, topic, values, "zstd", partition=1)
    group = f"g-{uuid.uuid4().hex[:8]}"
    env = router_env(cfg, group, 0, INGEST_LOG_LEVEL="WARNING", **hide_codecs(tmp_path))
    proc = await spawn_router(env)
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), 60)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    lines = out.decode(errors="replace").strip().splitlines()
    assert proc.returncode == 1, lines
    assert len(lines) == 1, lines  # one line: no traceback, no retry loop
    assert f"{topic} partition 1 offset 0" in lines[0] and "zstd" in lines[0], lines
    assert set((await kafka.committed(bootstrap, group, topic)).values()) == {None}

    # A replay of that topic: the same line, and the exit code of a range it cannot replay.
    replay = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "app.commands",
        "replay",
        "--from-offset",
        "0",
        "--dry-run",
        cwd=ROOT,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(replay.communicate(), 60)
    lines = out.decode(errors="replace").strip().splitlines()
    assert replay.returncode == 2, lines
    assert len(lines) == 1 and f"{topic} partition 1 offset 0" in lines[0], lines
