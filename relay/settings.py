"""Relay-only settings (env prefix ``INGEST_RELAY_``)."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from pipeline.settings import build


class RelaySettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="INGEST_RELAY_", frozen=True, extra="ignore")

    # Names this outbox (one per database): the transactional id is
    # schemas.ids.relay_transactional_id(instance). Never change it for a running outbox.
    instance: str = Field("default", min_length=1)
    # The compacted topic the progress record is written to, in each transaction.
    progress_topic: str = Field("ingest.outbox.progress", min_length=1)
    # Rows per Kafka transaction.
    batch_size: int = Field(500, ge=1, le=100_000)
    # Pause between polls of an empty (or not yet visible) outbox.
    poll_interval_ms: int = Field(200, ge=10)
    # A standby relay retries the advisory lock this often.
    lock_retry_seconds: float = Field(1.0, gt=0)
    # The broker aborts a transaction left open longer than this (a hung relay).
    transaction_timeout_ms: int = Field(60_000, ge=1000)
    # Published rows older than this are pruned (0 = keep forever), as the ledger is.
    retention_days: float = Field(7.0, ge=0)
    prune_interval_seconds: float = Field(3600.0, gt=0)
    # Fault injection for tests: wait this long (or until SIGTERM) between the sends'
    # acknowledgements and the commit, so a kill lands inside an open transaction.
    # Never set it in production.
    fault_commit_delay_seconds: float = Field(0.0, ge=0)


def load_relay_settings(**overrides: object) -> RelaySettings:
    """Environment plus the CLI flags that were given (None = not given).

    A bad value raises :class:`pipeline.settings.ConfigError` naming the variable.
    """
    return build(RelaySettings, **overrides)
