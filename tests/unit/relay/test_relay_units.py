"""The relay's pure parts: its settings, its progress record, its order, its id."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from pipeline.settings import ConfigError
from relay import progress
from relay.outbox import START, Position, Row
from relay.settings import load_relay_settings
from schemas.ids import relay_transactional_id


def test_a_bad_setting_names_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INGEST_RELAY_BATCH_SIZE", "0")
    with pytest.raises(ConfigError, match="INGEST_RELAY_BATCH_SIZE"):
        load_relay_settings()


def test_flags_override_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INGEST_RELAY_INSTANCE", "from-env")
    assert load_relay_settings(instance=None).instance == "from-env"
    assert load_relay_settings(instance="from-flag").instance == "from-flag"


def test_progress_round_trips_beyond_64_bit_json_floats() -> None:
    txid = 2**62 + 7  # xid8 values exceed what a JSON float keeps exactly
    row = Row("task-x", Position(txid, 41), "t", None, [], b"", datetime.now(UTC))
    assert progress.decode(progress.encode(row)) == Position(txid, 41)


def test_order_is_by_transaction_then_sequence() -> None:
    assert START < Position(1, 900) < Position(2, 5) < Position(2, 6)


def test_the_transactional_id_format_never_changes() -> None:
    assert relay_transactional_id("default") == "ingest-outbox-relay:default"
    with pytest.raises(ValueError):
        relay_transactional_id("")
