"""The environment variables the settings classes read."""

from __future__ import annotations

from tests.unit.deploy.assets import (
    known_env_vars,
)


def test_env_var_derivation() -> None:
    known = known_env_vars()
    for name in (
        "KAFKA_BOOTSTRAP_SERVERS",
        "TEMPORAL_ADDRESS",
        "DATABASE_URL",
        "INGEST_METRICS_PORT",
    ):
        assert name in known
    assert "KAFKA_BOOTSTRAP_SERVER" not in known
