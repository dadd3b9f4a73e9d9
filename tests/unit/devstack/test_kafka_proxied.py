"""The single broker's opt-in PROXIED listener (``INGEST_STACK_KAFKA_PROXIED_PORT``):
its ``server.properties`` both ways, and what the Kafka proxy connects (no broker, no
Toxiproxy here; tests/faults/test_net_faults.py runs them)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from devstack import toxiproxy
from devstack.kafka import render_properties
from devstack.procs import StackError
from devstack.settings import StackSettings
from pydantic import ValidationError

# server.properties of a plain stack, byte for byte as before the listener existed.
PLAIN = """\
# Written by `ingest stack up`; edits are overwritten.
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=127.0.0.1:9093
listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093
advertised.listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=/data
num.partitions=6
auto.create.topics.enable=false
offsets.topic.replication.factor=1
offsets.topic.num.partitions=6
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
log.retention.hours=168
log.segment.bytes=104857600
"""


@pytest.fixture(autouse=True)
def _no_stack_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in list(os.environ):
        if key.startswith("INGEST_STACK_"):
            monkeypatch.delenv(key)


def _cfg(**kw: object) -> StackSettings:
    return StackSettings(dir=Path("/nonexistent"), **kw)  # type: ignore[arg-type]


def _props(text: str) -> dict[str, str]:
    return dict(
        line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#")
    )


def test_off_by_default_and_the_properties_are_unchanged() -> None:
    cfg = _cfg()
    assert cfg.kafka_proxied_port == 0
    assert render_properties(cfg, Path("/data")) == PLAIN


def test_on_listens_inside_and_advertises_the_proxy() -> None:
    cfg = _cfg(kafka_proxied_port=19092)
    text = render_properties(cfg, Path("/data"))
    props = _props(text)
    assert props["listeners"] == (
        "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093,PROXIED://127.0.0.1:19192"
        ",PROXIED_B://127.0.0.1:19193"
    )
    assert props["advertised.listeners"] == (
        "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093,PROXIED://127.0.0.1:19092"
        ",PROXIED_B://127.0.0.1:19093"
    )
    assert props["listener.security.protocol.map"] == (
        "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,PROXIED:PLAINTEXT,PROXIED_B:PLAINTEXT"
    )
    assert props["inter.broker.listener.name"] == "PLAINTEXT"
    # Nothing else moves: the other lines are the plain stack's.
    changed = {"listeners", "advertised.listeners", "listener.security.protocol.map"}
    plain = _props(PLAIN)
    assert {k: v for k, v in props.items() if k not in changed} == {
        k: v for k, v in plain.items() if k not in changed
    }


def test_the_proxy_forwards_the_advertised_port_to_the_listener() -> None:
    cfg = _cfg(kafka_proxied_port=29492, kafka_proxied_listen_port=29493)
    assert toxiproxy.kafka_listen(cfg) == "127.0.0.1:29492"
    assert toxiproxy.kafka_upstream(cfg) == "127.0.0.1:29493"
    # the second listener, for one client cut alone: the next ports
    assert toxiproxy.kafka_listen(cfg, 1) == "127.0.0.1:29493"
    assert toxiproxy.kafka_upstream(cfg, 1) == "127.0.0.1:29494"


def test_with_secure_listeners_too(tmp_path: Path) -> None:
    cfg = StackSettings(dir=tmp_path, kafka_proxied_port=19092, secure=True)
    props = _props(render_properties(cfg, Path("/data")))
    assert props["listeners"].endswith(
        "OAUTH://127.0.0.1:9194,PROXIED://127.0.0.1:19192,PROXIED_B://127.0.0.1:19193"
    ), props["listeners"]
    assert props["advertised.listeners"].endswith(
        "OAUTH://127.0.0.1:9194,PROXIED://127.0.0.1:19092,PROXIED_B://127.0.0.1:19093"
    )
    assert props["listener.security.protocol.map"].endswith(
        ",OAUTH:SASL_SSL,PROXIED:PLAINTEXT,PROXIED_B:PLAINTEXT"
    )


def test_ports_are_checked() -> None:
    with pytest.raises(ValidationError):
        _cfg(kafka_proxied_port=-1)
    with pytest.raises(ValidationError):
        _cfg(kafka_proxied_listen_port=0)


def test_a_broker_without_the_listener_says_so(tmp_path: Path) -> None:
    from devstack.kafka import Kafka

    from tests.support.net import free_port

    closed = free_port()  # nothing listens there
    assert Kafka(_cfg()).missing_listeners() == ""
    cfg = StackSettings(dir=tmp_path, kafka_proxied_port=19092, kafka_proxied_listen_port=closed)
    assert Kafka(cfg).missing_listeners() == "PROXIED, PROXIED_B"


def test_a_foreign_broker_without_the_listener_is_left_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A broker answers without the PROXIED listener and this stack has no pid file for
    it: ``ensure`` (``up``, the ``proxied`` fixture) says so rather than restart it."""
    from devstack.kafka import Kafka

    from tests.support.net import free_port

    cfg = StackSettings(
        dir=tmp_path, kafka_proxied_port=19092, kafka_proxied_listen_port=free_port()
    )
    monkeypatch.setattr(Kafka, "already_running", lambda self, what: True)
    with pytest.raises(
        StackError,
        match=r"no PROXIED, PROXIED_B listener.*not started by this stack.*PROXIED_PORT set",
    ):
        Kafka(cfg).ensure()


def test_the_fixture_points_a_database_url_at_the_proxy() -> None:
    from devstack.toxiproxy import Proxy, ToxiproxyClient

    from tests.support.toxiproxy import Proxied

    def proxy(port: int) -> Proxy:
        return Proxy(name=f"p{port}", listen=f"127.0.0.1:{port}", upstream="x:1", enabled=True)

    found = Proxied(ToxiproxyClient("http://none"), proxy(1), proxy(2), proxy(3), proxy(4))
    url = "postgresql://postgres:pw@127.0.0.1:55432/t_abc?sslmode=disable"
    assert found.database_url(url) == "postgresql://postgres:pw@127.0.0.1:3/t_abc?sslmode=disable"
    assert found.database_url("postgresql://127.0.0.1:55432/x") == "postgresql://127.0.0.1:3/x"
