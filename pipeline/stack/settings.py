"""Where and how the local stack runs: ``INGEST_STACK_*`` settings and the one host."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

HOST = "127.0.0.1"


class StackSettings(BaseSettings):
    """Where and how the local stack runs (env prefix ``INGEST_STACK_``)."""

    model_config = SettingsConfigDict(env_prefix="INGEST_STACK_", frozen=True, extra="ignore")

    dir: Path = Path(".stack")
    # 4.1.x: KRaft-only line that runs on Java 17 and that aiokafka 0.12+ speaks to.
    kafka_version: str = "4.1.1"
    kafka_port: int = Field(9092, ge=1, le=65535)
    kafka_controller_port: int = Field(9093, ge=1, le=65535)
    kafka_heap: str = "768m"
    # >1: a local KRaft cluster (pipeline/stack/kafka_cluster.py), e.g. to try failover.
    kafka_nodes: int = Field(1, ge=1, le=9)
    temporal_port: int = Field(7233, ge=1, le=65535)
    temporal_ui: bool = True
    temporal_ui_port: int = Field(8233, ge=1, le=65535)
    # Dev-server dynamic config, ``KEY=VALUE`` pairs (VALUE is JSON), each passed as
    # ``--dynamic-config-value``; e.g. ["limit.historyCount.suggestContinueAsNew=40"].
    # From the environment: a JSON list.
    temporal_dynamic_config: tuple[str, ...] = ()
    pg_port: int = Field(55432, ge=1, le=65535)

    @field_validator("temporal_dynamic_config")
    @classmethod
    def _key_value_pairs(cls, pairs: tuple[str, ...]) -> tuple[str, ...]:
        for pair in pairs:
            key, sep, value = pair.partition("=")
            if not sep or not key.strip():
                raise ValueError(f"{pair!r} is not KEY=VALUE")
            try:
                json.loads(value)
            except ValueError:
                raise ValueError(
                    f"{pair!r}: the value must be JSON (a string needs quotes)"
                ) from None
        return pairs
