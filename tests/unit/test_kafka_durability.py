"""The client settings a broker failover relies on (docs/kafka.md), pinned."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline import kafka
from pipeline.settings import KafkaSettings

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ["pipeline", "schemas", "ingress", "router", "workers", "scheduler"]


async def test_producers_wait_for_every_in_sync_replica_and_are_idempotent() -> None:
    cfg = KafkaSettings(bootstrap_servers="127.0.0.1:1")
    for producer in (kafka.producer(cfg), kafka.producer(cfg, max_request_size=4 << 20)):
        assert producer._sender._acks == -1  # acks=all
        assert producer._txn_manager is not None  # idempotence: producer id + sequences
        # A batch waiting for a new leader expires only after the request timeout,
        # which must outlast a leader election (about 10 s, broker.session.timeout.ms 9 s).
        assert producer._request_timeout_ms == cfg.request_timeout_ms >= 15_000


async def test_idempotence_cannot_be_weakened_by_an_override() -> None:
    with pytest.raises(ValueError, match="acks=1 not supported"):
        kafka.producer(KafkaSettings(), acks=1)


async def test_consumers_commit_by_hand_and_read_committed() -> None:
    consumer = kafka.consumer(KafkaSettings(), "t", group_id="g")
    assert consumer._enable_auto_commit is False
    assert consumer._isolation_level == "read_committed"


async def test_consumers_fetch_with_the_configured_wait() -> None:
    default = kafka.consumer(KafkaSettings(), "t", group_id="g")
    assert (default._fetch_min_bytes, default._fetch_max_wait_ms) == (1, 500)  # aiokafka's
    tuned = kafka.consumer(
        KafkaSettings(fetch_min_bytes=16384, fetch_max_wait_ms=50), "t", group_id="g"
    )
    assert (tuned._fetch_min_bytes, tuned._fetch_max_wait_ms) == (16384, 50)


def test_every_kafka_client_is_built_by_pipeline_kafka() -> None:
    direct = [
        f"{path.relative_to(ROOT)}"
        for pkg in PACKAGES
        for path in (ROOT / pkg).rglob("*.py")
        if path != ROOT / "pipeline" / "kafka.py"
        and ("AIOKafkaProducer(" in path.read_text() or "AIOKafkaConsumer(" in path.read_text())
    ]
    assert direct == [], "build Kafka clients with pipeline.kafka.producer()/consumer()"
