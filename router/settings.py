"""Router-only settings (env prefix ``INGEST_ROUTER_``)."""

from __future__ import annotations

import os

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from pipeline.settings import ConfigError, build
from schemas.envelope import MAX_EVENT_BYTES

# Replaced by INGEST_MAX_EVENT_BYTES (one limit for ingress and router): refused, not ignored.
_OLD_LIMIT = "INGEST_ROUTER_MAX_EVENT_BYTES"


class RouterSettings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="INGEST_ROUTER_", frozen=True, extra="ignore", populate_by_name=True
    )

    group: str = "ingest-router"
    # Concurrent start_workflow calls. The dev server peaks around 32-64 on 2 cores.
    concurrency: int = Field(64, ge=1, le=4096)
    # Messages fetched but not yet done; fetching pauses above this (backpressure).
    max_in_flight: int = Field(4000, ge=1)
    # ... and their bytes (keys, values, headers; router/budget.py): fetching also pauses
    # above this, so a Temporal outage with large events stays inside the pod's memory.
    # One fetch may overshoot it by up to the consumer's fetch size.
    max_in_flight_bytes: int = Field(64 * 1024 * 1024, ge=1024)
    max_poll_records: int = Field(500, ge=1)
    commit_interval_ms: int = Field(500, ge=10)
    refresh_seconds: float = Field(10.0, gt=0)
    # Consult/write the durable dedupe ledger (routed_triggers).
    ledger: bool = True
    # Ledger rows older than this are pruned (0 = keep forever). Must exceed the
    # longest replay window operators may need; see README "Dedupe ledger".
    ledger_retention_days: float = Field(30.0, ge=0)
    # The one event size limit, shared with ingress (INGEST_MAX_EVENT_BYTES, see
    # schemas.envelope.MAX_EVENT_BYTES): ingress never forwards an event above it, so
    # only events published straight to the events topic are dead-lettered too_large here.
    max_event_bytes: int = Field(MAX_EVENT_BYTES, ge=1, alias="INGEST_MAX_EVENT_BYTES")
    # How long a partition revoke waits for its in-flight starts before giving up
    # on them (they are then redone by the partition's next owner, as duplicates).
    revoke_drain_seconds: float = Field(10.0, ge=0)


def load_router_settings(**overrides: object) -> RouterSettings:
    """Environment plus the CLI flags that were given (None = not given).

    A bad value raises :class:`ConfigError` naming the variable, e.g.
    ``invalid setting INGEST_ROUTER_CONCURRENCY: ...``.
    """
    if any(k.upper() == _OLD_LIMIT for k in os.environ):
        raise ConfigError(
            f"{_OLD_LIMIT} is no longer read: set INGEST_MAX_EVENT_BYTES, the one event size"
            " limit of ingress and router"
        )
    return build(RouterSettings, **overrides)
