"""Fixtures for the broker-failover scenarios: a private 3-node KRaft cluster.

``kafka_cluster`` (one per test module) starts three combined broker+controller
JVMs on free ports, data under pytest's tmp dir, from the local stack's broker
jars (``Kafka.libs()``: already fetched by ``ingest stack up``, fetched with
Maven when missing). Replication factor 3, ``min.insync.replicas=2``, unclean
leader election off. Each node also has a PROXIED listener advertised at a port where
a Toxiproxy proxy may stand (``Node.proxied_address``; nothing listens there unless a
test makes that proxy). It is SIGKILLed by pid at the end; the shared stack's broker is
never touched.

``cluster_topics``: fresh raw/events/DLQ/emit topics on that cluster (6
partitions, so each broker leads some), after waiting until every replica of
every partition is back in sync (a scenario before may have restarted brokers).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator

import pytest
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from devstack.kafka import Kafka
from devstack.kafka_cluster import KafkaCluster
from devstack.kafka_inspect import under_replicated
from devstack.settings import StackSettings

from pipeline import settings
from pipeline.clients import ensure_topics, topic_configs
from tests.support import ROOT
from tests.support.net import free_ports
from tests.support.stack import Topics

NODES = 3
PARTITIONS = 6
HEAP = "256m"


@pytest.fixture(scope="module")
def kafka_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    stack_kafka = Kafka(StackSettings(dir=ROOT / ".stack"))
    flat = free_ports(4 * NODES)
    ports = [(flat[4 * i], flat[4 * i + 1]) for i in range(NODES)]
    # Each node's PROXIED listener and the port it advertises, where a proxy may stand
    # (the soak's Kafka toxics); the failover scenarios use PLAINTEXT only.
    proxied = [(flat[4 * i + 2], flat[4 * i + 3]) for i in range(NODES)]
    cluster = KafkaCluster(
        tmp_path_factory.mktemp("kafka3"), stack_kafka.libs, ports, heap=HEAP, proxied=proxied
    )
    try:
        cluster.ensure()
        yield cluster
    finally:
        # Its data is thrown away: SIGKILL rather than three controlled shutdowns,
        # the last of which waits for a controller quorum that is already gone.
        for node_id in cluster.running():
            cluster.kill(node_id)


async def all_in_sync(cluster: KafkaCluster, timeout: float = 120) -> None:
    """Start any node a failed scenario left down, then wait until no partition is short."""
    for node in cluster.nodes:
        if node.proc.pid() is None:
            await asyncio.to_thread(cluster.start, node.node_id)
    deadline = time.monotonic() + timeout
    while short := await under_replicated(cluster.bootstrap):
        if time.monotonic() > deadline:
            raise AssertionError(f"replicas still out of sync after {timeout}s: {short[:5]}")
        await asyncio.sleep(0.5)


@pytest.fixture
async def cluster_topics(kafka_cluster: KafkaCluster) -> Topics:
    await all_in_sync(kafka_cluster)
    tag = uuid.uuid4().hex[:10]
    t = Topics(raw=f"raw-{tag}", events=f"events-{tag}", dlq=f"dlq-{tag}", out=f"out-{tag}")
    # The raw topic stamps each message with the broker's append time, so a
    # scenario's routing delays start when an event was really in Kafka, not
    # when the test producer first tried to send it.
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka_cluster.bootstrap)
    await admin.start()
    try:
        configs = {**topic_configs(NODES), "message.timestamp.type": "LogAppendTime"}
        resp = await admin.create_topics(
            [NewTopic(t.raw, PARTITIONS, NODES, topic_configs=configs)]
        )
        assert [code for _, code, *_ in resp.topic_errors] == [0], resp
    finally:
        await admin.close()
    created = await ensure_topics(
        settings.KafkaSettings(bootstrap_servers=kafka_cluster.bootstrap),
        [t.events, t.dlq, t.out],
        PARTITIONS,
    )
    assert len(created) == 3
    return t
