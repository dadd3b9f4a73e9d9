"""The multi-node stack's layout and the topic settings (no JVM started here)."""

from __future__ import annotations

from pathlib import Path

import pytest
from devstack.kafka import Kafka
from devstack.kafka_cluster import KafkaCluster, stack_kafka
from devstack.procs import StackError
from devstack.settings import StackSettings

from pipeline.clients import topic_configs
from tests.support.net import free_ports


def test_stack_cluster_ports_keep_the_default_bootstrap_address(tmp_path: Path) -> None:
    cluster = stack_kafka(StackSettings(dir=tmp_path), 3)
    assert isinstance(cluster, KafkaCluster)
    assert cluster.bootstrap == "127.0.0.1:9092,127.0.0.1:9094,127.0.0.1:9096"
    assert [n.controller_port for n in cluster.nodes] == [9093, 9095, 9097]
    assert cluster.replication_factor == 3 and cluster.min_insync_replicas == 2


def test_one_node_is_the_single_broker_stack(tmp_path: Path) -> None:
    assert isinstance(stack_kafka(StackSettings(dir=tmp_path)), Kafka)
    assert isinstance(stack_kafka(StackSettings(dir=tmp_path, kafka_nodes=3)), KafkaCluster)


def test_a_started_cluster_is_found_without_the_flag(tmp_path: Path) -> None:
    cluster = stack_kafka(StackSettings(dir=tmp_path), 3)
    assert isinstance(cluster, KafkaCluster)
    for n in cluster.nodes:
        n.home.mkdir(parents=True)
    cluster.nodes[0].proc.pidfile.parent.mkdir(parents=True)
    cluster.nodes[0].proc.pidfile.write_text("999999999")
    found = stack_kafka(StackSettings(dir=tmp_path))  # what `status` / `down` do
    assert isinstance(found, KafkaCluster) and len(found.nodes) == 3


def test_replication_never_exceeds_the_node_count(tmp_path: Path) -> None:
    two = KafkaCluster(tmp_path, tmp_path, [(1, 2), (3, 4)])
    assert (two.replication_factor, two.min_insync_replicas) == (2, 1)


def test_overlapping_ports_are_refused(tmp_path: Path) -> None:
    with pytest.raises(StackError, match="overlap"):
        KafkaCluster(tmp_path, tmp_path, [(9092, 9093), (9093, 9095)])


def test_node_properties_name_every_voter_and_the_durability_settings(tmp_path: Path) -> None:
    cluster = KafkaCluster(tmp_path, tmp_path, [(11, 12), (13, 14), (15, 16)])
    for n in cluster.nodes:  # storage already formatted: _configure only writes properties
        (n.home / "data").mkdir(parents=True)
        (n.home / "data" / "meta.properties").write_text("")
    cluster._configure("java")
    props = (cluster.node(2).home / "server.properties").read_text().splitlines()
    for line in (
        "node.id=2",
        "controller.quorum.voters=1@127.0.0.1:12,2@127.0.0.1:14,3@127.0.0.1:16",
        "listeners=PLAINTEXT://127.0.0.1:13,CONTROLLER://127.0.0.1:14",
        "default.replication.factor=3",
        "min.insync.replicas=2",
        "unclean.leader.election.enable=false",
        "offsets.topic.replication.factor=3",
        "transaction.state.log.min.isr=2",
    ):
        assert line in props


def test_proxied_nodes_advertise_their_proxy_and_listen_behind_it(tmp_path: Path) -> None:
    # Issue 40: a client bootstrapping through the proxies must keep using them, so each
    # node advertises its proxy's port on PROXIED and listens on its own port behind it.
    cluster = KafkaCluster(tmp_path, tmp_path, [(11, 12), (13, 14)], proxied=[(21, 31), (23, 33)])
    for n in cluster.nodes:
        (n.home / "data").mkdir(parents=True)
        (n.home / "data" / "meta.properties").write_text("")
    cluster._configure("java")
    props = (cluster.node(2).home / "server.properties").read_text().splitlines()
    assert (
        "listeners=PLAINTEXT://127.0.0.1:13,CONTROLLER://127.0.0.1:14,PROXIED://127.0.0.1:23"
        in props
    )
    assert "advertised.listeners=PLAINTEXT://127.0.0.1:13,PROXIED://127.0.0.1:33" in props
    assert (
        "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,PROXIED:PLAINTEXT"
        in props
    )
    assert "inter.broker.listener.name=PLAINTEXT" in props  # replication never via a proxy
    assert cluster.proxied_bootstrap == "127.0.0.1:31,127.0.0.1:33"
    assert cluster.node(1).proxied_upstream == "127.0.0.1:21"


def test_proxied_ports_must_match_the_nodes_and_not_overlap(tmp_path: Path) -> None:
    with pytest.raises(StackError, match="2 PROXIED port pairs for 3"):
        KafkaCluster(tmp_path, tmp_path, [(1, 2), (3, 4), (5, 6)], proxied=[(7, 8), (9, 10)])
    with pytest.raises(StackError, match="overlap"):
        KafkaCluster(tmp_path, tmp_path, [(1, 2)], proxied=[(2, 8)])


@pytest.mark.parametrize(("rf", "min_isr"), [(1, "1"), (2, "1"), (3, "2"), (5, "2")])
def test_topic_configs(rf: int, min_isr: str) -> None:
    assert topic_configs(rf) == {
        "min.insync.replicas": min_isr,
        "unclean.leader.election.enable": "false",
    }


def test_free_ports_never_repeats_a_port() -> None:
    # The fault suite's private cluster takes its six listener ports from one
    # free_ports call; drawing them one by one once gave a node the same port twice.
    for _ in range(20):
        ports = free_ports(64)
        assert len(set(ports)) == 64
        assert all(1024 <= p <= 65535 for p in ports)
