"""Which namespace a test session, and each process it starts, uses
(``tests.support.namespaces``, ``tests.support.process.clean_env``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import namespaces
from tests.support.process import clean_env


def test_two_sessions_never_share_a_namespace_and_a_released_one_is_reused(
    tmp_path: Path,
) -> None:
    first = namespaces.claim(tmp_path)
    second = namespaces.claim(tmp_path)
    assert (first.name, second.name) == ("ingest-test", "ingest-test-2")
    first.release()
    third = namespaces.claim(tmp_path)
    assert third.name == "ingest-test"
    second.release()
    third.release()


@pytest.fixture
def session() -> Iterator[namespaces.Session]:
    before = namespaces.current
    namespaces.current = namespaces.Session("127.0.0.1:7233", "ingest-test-2")
    yield namespaces.current
    namespaces.current = before


def test_a_child_on_the_shared_stack_gets_the_sessions_namespace(
    session: namespaces.Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEMPORAL_NAMESPACE", "from-the-shell")
    assert clean_env(TEMPORAL_ADDRESS=session.address)["TEMPORAL_NAMESPACE"] == "ingest-test-2"
    assert clean_env()["TEMPORAL_NAMESPACE"] == "ingest-test-2"  # the default address


def test_a_child_on_a_private_server_gets_default(session: namespaces.Session) -> None:
    assert clean_env(TEMPORAL_ADDRESS="127.0.0.1:41234")["TEMPORAL_NAMESPACE"] == "default"


def test_a_namespace_the_test_names_wins(session: namespaces.Session) -> None:
    env = clean_env(TEMPORAL_ADDRESS=session.address, TEMPORAL_NAMESPACE="other")
    assert env["TEMPORAL_NAMESPACE"] == "other"
