"""``KAFKA_CREATE_TOPICS``: ``auto`` creates what is missing with the pipeline's topic
settings; ``check`` creates nothing and names every missing topic in one line.

The admin client is a fake here (pure logic: which calls are made); creation against a
real broker is covered by the integration tests that call ``ensure_topics``.
"""

from __future__ import annotations

import os
from types import SimpleNamespace
from typing import Any

import pytest

from pipeline import clients, settings


@pytest.fixture(autouse=True)
def _no_kafka_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.upper().startswith("KAFKA_"):
            monkeypatch.delenv(name)


class FakeAdmin:
    existing: set[str] = set()
    created: list[Any] = []
    error_code = 0

    def __init__(self, **kw: Any) -> None:
        pass

    async def start(self) -> None:
        pass

    async def close(self) -> None:
        pass

    async def list_topics(self) -> list[str]:
        return sorted(self.existing)

    async def describe_cluster(self) -> dict[str, Any]:
        return {"brokers": [1, 2, 3]}

    async def create_topics(self, new: list[Any]) -> Any:
        FakeAdmin.created.extend(new)
        return SimpleNamespace(topic_errors=[(t.name, self.error_code, "refused") for t in new])


@pytest.fixture
def admin(monkeypatch: pytest.MonkeyPatch) -> type[FakeAdmin]:
    FakeAdmin.existing = {"a"}
    FakeAdmin.created = []
    FakeAdmin.error_code = 0
    monkeypatch.setattr(clients, "AIOKafkaAdminClient", FakeAdmin)
    return FakeAdmin


async def test_auto_creates_the_missing_with_the_topic_settings(admin) -> None:
    cfg = settings.KafkaSettings()
    assert cfg.create_topics == "auto"
    assert await clients.ensure_topics(cfg, ["a", "b", "c"], 6) == ["b", "c"]
    assert [t.name for t in admin.created] == ["b", "c"]
    assert admin.created[0].topic_configs["unclean.leader.election.enable"] == "false"


async def test_check_creates_nothing_and_names_the_missing(admin, monkeypatch) -> None:
    monkeypatch.setenv("KAFKA_CREATE_TOPICS", " CHECK ")
    cfg = settings.load_settings().kafka
    assert cfg.create_topics == "check"
    with pytest.raises(settings.ConfigError) as info:
        await clients.ensure_topics(cfg, ["a", "b", "c"], 6)
    assert isinstance(info.value, clients.MissingTopics)
    assert info.value.missing == ["b", "c"]
    message = str(info.value)
    assert message.startswith("KAFKA_CREATE_TOPICS=check: ") and message.count("\n") == 0
    assert "b, c" in message
    assert admin.created == []
    assert await clients.ensure_topics(cfg, ["a"], 6) == []


async def test_a_policy_refusal_points_at_check_mode(admin) -> None:
    from aiokafka.errors import PolicyViolationError

    admin.error_code = 44  # POLICY_VIOLATION, e.g. MSK Serverless and min.insync.replicas
    with pytest.raises(PolicyViolationError, match="KAFKA_CREATE_TOPICS=check"):
        await clients.ensure_topics(settings.KafkaSettings(), ["b"], 6)


def test_bad_mode_names_the_variable(monkeypatch) -> None:
    monkeypatch.setenv("KAFKA_CREATE_TOPICS", "never")
    with pytest.raises(settings.ConfigError, match=r"^invalid setting KAFKA_CREATE_TOPICS: "):
        settings.load_settings()
