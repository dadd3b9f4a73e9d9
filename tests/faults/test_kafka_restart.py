"""Scenario 6: restart a PRIVATE Kafka broker mid-stream.

The shared broker is never touched: this test runs its own KRaft broker
(``devstack.kafka.Kafka`` on free ports, data in tmp, the broker jars
symlinked from ``.stack/kafka/libs-<version>`` so Maven is not run again). Half the
events are produced, the broker is stopped while ingress and router work through
them, restarted, then the other half is produced. Nothing is lost, nothing runs
twice.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest
from devstack.kafka import Kafka
from devstack.settings import StackSettings

from pipeline import settings
from pipeline.clients import ensure_topics
from tests.faults import harness as h
from tests.support import ROOT, db, kafka
from tests.support.net import free_ports
from tests.support.wait import eventually

N = h.events("kafka_restart", 200)
DOWN = h.scaled(5, 20)


@pytest.mark.timeout(h.scaled(480, h.drain_seconds(N) + 900))
async def test_kafka_broker_restart(stack, cfg, topics, task_queue, temporal, db_pool, fault):
    kafka_port, controller_port = free_ports(2)
    scfg = StackSettings(
        dir=fault.tmp / "kstack",
        kafka_port=kafka_port,
        kafka_controller_port=controller_port,
        kafka_heap="384m",
    )
    broker = Kafka(scfg)
    shared_libs = ROOT / ".stack" / "kafka" / f"libs-{scfg.kafka_version}"
    if not (shared_libs / ".complete").exists():
        pytest.skip(f"{shared_libs} is not fetched yet (ingest stack up fetches it)")
    broker.home.mkdir(parents=True, exist_ok=True)
    (broker.home / shared_libs.name).symlink_to(shared_libs, target_is_directory=True)
    await asyncio.to_thread(broker.ensure)
    fault.cleanup(lambda: asyncio.to_thread(broker.stop))
    bootstrap = broker.address
    await ensure_topics(
        settings.KafkaSettings(bootstrap_servers=bootstrap),
        [topics.raw, topics.events, topics.dlq, topics.out],
        3,
    )
    etype = f"fault.kafka.{uuid.uuid4().hex[:8]}"
    aid = await db.seed_activity(db_pool, etype)
    ep = h.Endpoints(bootstrap, stack.temporal, cfg.database.url.get_secret_value())
    pipe = fault.pipeline(ep, topics, task_queue)
    figures = fault.figures("6 Kafka broker restart", events=N, kills=0, dlq_expected=0)
    produced = h.Produced()
    ingress = await pipe.spawn("ingress")
    router = await pipe.spawn("router")
    worker = await pipe.spawn("worker")
    await h.produce_paced(bootstrap, topics.raw, N // 2, etype, 2, produced)

    async def routing() -> bool:
        router.assert_alive()
        return await db_pool.fetchval("SELECT count(*) FROM routed_triggers") > 0

    await eventually(routing, 90, "the router to start runs")
    await asyncio.to_thread(broker.stop)
    await asyncio.sleep(DOWN)  # the broker is down this long
    await asyncio.to_thread(broker.ensure)
    figures.update(restarts=1)
    rest = h.Produced()
    await h.produce_paced(bootstrap, topics.raw, N - N // 2, etype, 2, rest)
    produced.coords += rest.coords
    assert len(set(produced.coords)) == N
    expected = h.expected_workflow_ids([aid], topics.raw, produced.coords)
    figures.update(dlq=await kafka.count(bootstrap, topics.dlq))
    await pipe.verify(temporal, db_pool, expected, figures, reduced_timeout=300)
    await pipe.committed_to_end("ingress", 90)
    await pipe.committed_to_end("router", 90)
    for child in (ingress, router, worker):
        child.assert_alive()
    assert await kafka.count(bootstrap, topics.dlq) == 0
