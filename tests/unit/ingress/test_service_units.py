"""The pieces of the service that need no broker: ack tracking, topics, config."""

from __future__ import annotations

import pytest
from aiokafka.structs import TopicPartition

from ingress.service import raw_topics
from ingress.settings import load_ingress_settings
from pipeline import settings
from pipeline.settings import ConfigError


def test_raw_topics_comma_separated() -> None:
    cfg = settings.load_settings(kafka__raw_topic=" a, b ,,c")
    assert raw_topics(cfg) == ["a", "b", "c"]


def test_config_env_and_overrides(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INGEST_INGRESS_GROUP", "g1")
    monkeypatch.setenv("INGEST_INGRESS_STRATEGY", "header:x-id")
    monkeypatch.setenv("INGEST_MAX_EVENT_BYTES", "123")
    c = load_ingress_settings()
    assert (c.group, c.strategy, c.max_event_bytes) == ("g1", "header:x-id", 123)
    assert load_ingress_settings(group="g2", max_event_bytes=5).max_event_bytes == 5


def test_config_errors_name_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match="INGEST_INGRESS_STRATEGY"):
        load_ingress_settings(strategy="uuid4")
    monkeypatch.setenv("INGEST_MAX_EVENT_BYTES", "zero")
    with pytest.raises(ConfigError, match="INGEST_MAX_EVENT_BYTES"):
        load_ingress_settings()


def test_batch_acks_commit_point_is_the_lowest_unacknowledged_offset() -> None:
    from ingress.acks import BatchAcks
    from ingress.records import transform
    from ingress.stamping import SourceStrategy
    from tests.unit.ingress.helpers import TransformKw, record

    kw: TransformKw = {
        "strategy": SourceStrategy(),
        "events_topic": "ev",
        "dlq_topic": "dlq",
        "max_bytes": 99,
    }
    a, b = TopicPartition("raw", 0), TopicPartition("raw", 1)
    msgs = {a: [record(b'{"type":"t"}', offset=o) for o in (10, 11, 13)]}  # 12: a marker
    msgs[b] = [record(b"bad", partition=1, offset=5)]
    out = {tp: [transform(m, **kw) for m in ms] for tp, ms in msgs.items()}
    acks = BatchAcks(msgs)
    assert acks.ack([out[a][1], out[a][2]]) == {a: 10}  # 10 still unacknowledged
    assert acks.ack([out[b][0]]) == {b: 6} and not acks.done
    assert acks.ack([out[a][0]]) == {a: 14} and acks.done  # 12 was never fetched
    assert acks.stamped == {"source": 3} and acks.dead == {"not_json": 1}
