"""Scenario 6: restart a PRIVATE Kafka broker mid-stream.

The shared broker is never touched: this test runs its own KRaft broker
(``pipeline.stack.kafka.Kafka`` on free ports, data in tmp, the broker jars
symlinked from ``.stack/kafka/libs-<version>`` so Maven is not run again). Half the
events are produced, the broker is stopped while ingress and router work through
them, restarted, then the other half is produced. Nothing is lost, nothing runs
twice.
"""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest

from pipeline import settings
from pipeline.clients import ensure_topics
from pipeline.stack.kafka import Kafka
from pipeline.stack.settings import StackSettings
from tests import helpers
from tests.conftest import ROOT
from tests.faults import harness as h

N = h.scaled(200, 3000)
DOWN = h.scaled(5, 20)


@pytest.mark.timeout(h.scaled(480, h.drain_seconds(N) + 900))
async def test_kafka_broker_restart(stack, cfg, topics, task_queue, temporal, db_pool, tmp_path):
    t0 = time.monotonic()
    scfg = StackSettings(
        dir=tmp_path / "kstack",
        kafka_port=h.free_port(),
        kafka_controller_port=h.free_port(),
        kafka_heap="384m",
    )
    broker = Kafka(scfg)
    shared_libs = ROOT / ".stack" / "kafka" / f"libs-{scfg.kafka_version}"
    if not (shared_libs / ".complete").exists():
        pytest.skip(f"{shared_libs} is not fetched yet (ingest stack up fetches it)")
    broker.home.mkdir(parents=True, exist_ok=True)
    (broker.home / shared_libs.name).symlink_to(shared_libs, target_is_directory=True)
    await asyncio.to_thread(broker.ensure)
    kafka = broker.address
    await ensure_topics(
        settings.KafkaSettings(bootstrap_servers=kafka),
        [topics.raw, topics.events, topics.dlq, topics.out],
        3,
    )
    etype = f"fault.kafka.{uuid.uuid4().hex[:8]}"
    aid = await helpers.seed_activity(db_pool, etype)
    ep = h.Endpoints(kafka, stack.temporal, cfg.database.url.get_secret_value())
    pipe = h.Pipeline(tmp_path, ep, topics, task_queue)
    produced = h.Produced()
    try:
        ingress = await pipe.spawn("ingress")
        router = await pipe.spawn("router")
        worker = await pipe.spawn("worker")
        await h.produce_paced(kafka, topics.raw, N // 2, etype, 2, produced)

        async def routing() -> bool:
            router.assert_alive()
            return await db_pool.fetchval("SELECT count(*) FROM routed_triggers") > 0

        await helpers.eventually(routing, 90, "the router to start runs")
        await asyncio.to_thread(broker.stop)
        await asyncio.sleep(DOWN)
        await asyncio.to_thread(broker.ensure)
        rest = h.Produced()
        await h.produce_paced(kafka, topics.raw, N - N // 2, etype, 2, rest)
        produced.coords += rest.coords
        assert len(set(produced.coords)) == N
        expected = h.expected_workflow_ids([aid], topics.raw, produced.coords)
        outcome = await h.verify(
            temporal, db_pool, task_queue, expected, timeout=h.scaled(300, h.drain_seconds(N))
        )
        for child, group, topic in (
            (ingress, pipe.ingress_group, topics.raw),
            (router, pipe.router_group, topics.events),
        ):
            await helpers.eventually(
                lambda g=group, t=topic: h.caught_up(kafka, g, t), 90, f"{child.kind} to commit"
            )
        for child in (ingress, router, worker):
            child.assert_alive()
        dlq = sum((await helpers.end_offsets(kafka, topics.dlq)).values())
        assert dlq == 0
    except BaseException:
        print(pipe.logs())
        raise
    finally:
        await pipe.close()
        await asyncio.to_thread(broker.stop)
    h.record(
        "6 Kafka broker restart",
        events=N,
        kills=0,
        restarts=1,
        lost=outcome.lost,
        duplicate_runs=outcome.duplicate_runs + outcome.duplicate_executions,
        dlq=dlq,
        dlq_expected=0,
        runs=outcome.runs,
        seconds=round(time.monotonic() - t0),
    )
