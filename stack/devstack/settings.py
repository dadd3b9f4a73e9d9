"""Where and how the local stack runs: ``INGEST_STACK_*`` settings and the one host."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

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
    # How long `stack up` waits for the broker to answer. A broker recovers every
    # partition's log before it answers: a dev box whose data directory holds the
    # thousands of topics the suites leave needed 3.5 min (a fresh one, 10 s).
    kafka_start_timeout_seconds: float = Field(300, gt=0)
    # >1: a local KRaft cluster (stack/devstack/kafka_cluster.py), e.g. to try failover.
    kafka_nodes: int = Field(1, ge=1, le=9)
    temporal_port: int = Field(7233, ge=1, le=65535)
    temporal_ui: bool = True
    temporal_ui_port: int = Field(8233, ge=1, le=65535)
    # Dev-server dynamic config, ``KEY=VALUE`` pairs (VALUE is JSON), each passed as
    # ``--dynamic-config-value``; e.g. ["limit.historyCount.suggestContinueAsNew=40"].
    # From the environment: a JSON list.
    temporal_dynamic_config: tuple[str, ...] = ()
    # Which Temporal: `dev` is `temporal server start-dev` (one process, one history
    # shard, SQLite); `server` is the real server (go.temporal.io/server) on the
    # stack's PostgreSQL, built once with `go install` (stack/devstack/temporal_server.py).
    temporal: Literal["dev", "server"] = "dev"
    # 1.31.2: the newest 1.31.x whose go.mod the machine's Go (1.26.8) builds.
    temporal_server_version: str = Field("1.31.2", pattern=r"^\d+\.\d+\.\d+$")
    # Outside the checkout, so every clone and CI run on a machine shares one build.
    temporal_server_cache: Path = Path("~/.cache/ingest/temporal-server")
    temporal_shards: int = Field(4, ge=1, le=1024)
    # Its two databases on the stack's PostgreSQL: `{name}` and `{name}_visibility`
    # (tests and benchmarks give a private server databases of its own).
    temporal_database: str = Field("temporal", pattern=r"^[a-z_][a-z0-9_]{0,40}$")
    # `single`: every service in one process; `split`: frontend, matching, worker and
    # `temporal_history_hosts` history processes, so shards move when one dies.
    temporal_shape: Literal["single", "split"] = "single"
    temporal_history_hosts: int = Field(2, ge=1, le=4)
    # The real server's web UI (temporalio/ui-server, on temporal_ui_port when
    # temporal_ui): 2.54.1 is the UI the dev server embeds; later ones need Go 1.26.10.
    temporal_ui_version: str = Field("2.54.1", pattern=r"^\d+\.\d+\.\d+$")
    pg_port: int = Field(55432, ge=1, le=65535)
    # The secured servers (`ingest stack up --secure`, stack/devstack/secure.py): Kafka's
    # TLS listeners beside PLAINTEXT (SASL_SSL SCRAM-SHA-512, mTLS, SASL_SSL OAUTHBEARER),
    # above the ports a --kafka-nodes cluster takes; and a second PostgreSQL (Debian's
    # server, TLS only) on pg_tls_port.
    secure: bool = False
    kafka_scram_port: int = Field(9192, ge=1, le=65535)
    kafka_mtls_port: int = Field(9193, ge=1, le=65535)
    kafka_oauth_port: int = Field(9194, ge=1, le=65535)
    pg_tls_port: int = Field(55433, ge=1, le=65535)
    # Traces (`ingest stack up --tracing`, stack/devstack/jaeger.py): Jaeger's all-in-one
    # (v2, on the OpenTelemetry collector), spans in memory, built once like the server.
    tracing: bool = False
    jaeger_version: str = Field("1.75.0", pattern=r"^\d+\.\d+\.\d+$")
    jaeger_cache: Path = Path("~/.cache/ingest/jaeger")
    jaeger_otlp_grpc_port: int = Field(4317, ge=1, le=65535)
    jaeger_otlp_http_port: int = Field(4318, ge=1, le=65535)
    jaeger_ui_port: int = Field(16686, ge=1, le=65535)  # the query API (/api/...) and page
    jaeger_query_grpc_port: int = Field(16685, ge=1, le=65535)
    # A built jaeger-ui (its folder with index.html): a Go-built binary embeds no web
    # assets and serves a placeholder page at / (the query API works either way).
    jaeger_ui_assets: Path | None = None
    # Network faults (stack/devstack/toxiproxy.py): Shopify's Toxiproxy, built once like
    # Jaeger (`ingest stack build --proxied`), its HTTP API on 127.0.0.1:toxiproxy_port.
    toxiproxy_version: str = Field("2.5.0", pattern=r"^\d+\.\d+\.\d+$")
    toxiproxy_cache: Path = Path("~/.cache/ingest/toxiproxy")
    toxiproxy_port: int = Field(8474, ge=1, le=65535)
    # Kafka behind a proxy: >0 adds a PROXIED listener (plaintext) to the single broker,
    # listening on kafka_proxied_listen_port and advertised as 127.0.0.1:kafka_proxied_port,
    # where a Toxiproxy proxy forwards to it (tests/support/toxiproxy.py); 0: no listener.
    kafka_proxied_port: int = Field(0, ge=0, le=65535)
    kafka_proxied_listen_port: int = Field(19192, ge=1, le=65535)

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
