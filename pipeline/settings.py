"""Configuration: one frozen settings object per process, built in ``main()``.

Every field reads an environment variable (named in the field's ``alias`` or by
its group's prefix) and may be overridden by a CLI flag. A bad value fails at
start-up with a :class:`ConfigError` that names the variable; secrets are
``SecretStr`` and never printed (``repr`` shows ``'**********'``).

One convention for every process: a package's own settings live in its
``settings.py`` as ``XxxSettings`` and are built by ``load_xxx_settings(**flags)``
(:func:`load_settings` here for what every process shares), each through
:func:`build` so that every bad-setting message has the same form.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Literal, TypeVar

from pydantic import Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from schemas.errors import IngestError

_FROZEN = SettingsConfigDict(frozen=True, extra="ignore", populate_by_name=True)


class KafkaSettings(BaseSettings):
    """Kafka connection and the application topics (env prefix ``KAFKA_``)."""

    model_config = SettingsConfigDict(env_prefix="KAFKA_", **_FROZEN)

    bootstrap_servers: str = "127.0.0.1:9092"
    raw_topic: str = "ingest.raw"
    events_topic: str = "ingest.events"
    dlq_topic: str = "ingest.dlq"
    partitions: int = Field(6, ge=1, le=1000)
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] | None = None
    sasl_username: str | None = None
    sasl_password: SecretStr | None = None
    ssl_cafile: Path | None = None
    ssl_certfile: Path | None = None
    ssl_keyfile: Path | None = None
    request_timeout_ms: int = Field(30_000, ge=1000)
    # How this project's producers (ingress, the router's DLQ, replay, emit tasks) compress
    # their batches. Consumers read every codec whatever this says.
    compression_type: Literal["none", "gzip", "snappy", "lz4", "zstd"] = "none"
    # Static group membership (KIP-345): this process's group.instance.id in the consumer
    # groups it joins (ingress, router, replay). Unset or empty: dynamic membership. It must
    # be unique per process within a group (e.g. a StatefulSet pod's name, docs/kafka.md):
    # the broker fences one of two members that share it.
    group_instance_id: str | None = None

    _blank_password = field_validator("sasl_password", mode="before")(
        classmethod(lambda cls, v: _empty_secret_is_unset(v))
    )

    @field_validator("group_instance_id", mode="before")
    @classmethod
    def _blank_instance_is_dynamic(cls, v: object) -> object:
        return (v.strip() or None) if isinstance(v, str) else v

    @field_validator("group_instance_id")
    @classmethod
    def _instance_id_chars(cls, v: str | None) -> str | None:
        # The broker's rule for group.instance.id (org.apache.kafka.common.internals.Topic).
        if v is not None and not re.fullmatch(r"[A-Za-z0-9._-]{1,249}", v):
            raise ValueError("at most 249 characters among ASCII letters, digits, '.', '_' and '-'")
        return v

    @field_validator("compression_type", mode="before")
    @classmethod
    def _codec_name(cls, v: object) -> object:
        return v.strip().lower() if isinstance(v, str) else v  # Kafka's own spelling: lz4

    @field_validator("compression_type")
    @classmethod
    def _codec_installed(cls, v: str) -> str:
        from aiokafka import codec

        if v not in ("none", "gzip") and not getattr(codec, f"has_{v}")():
            raise ValueError(
                f"{v} needs a codec library that is not installed: "
                "pip install 'aiokafka[lz4,snappy,zstd]'"
            )
        return v

    def compression(self) -> str | None:
        """``compression_type`` as aiokafka's producer takes it (None: uncompressed)."""
        return None if self.compression_type == "none" else self.compression_type

    def client_kwargs(self) -> dict[str, object]:
        """Keyword arguments shared by every aiokafka client we build."""
        kw: dict[str, object] = {
            "bootstrap_servers": self.bootstrap_servers,
            "security_protocol": self.security_protocol,
            "request_timeout_ms": self.request_timeout_ms,
        }
        if self.security_protocol in ("SSL", "SASL_SSL"):
            from aiokafka.helpers import create_ssl_context

            kw["ssl_context"] = create_ssl_context(
                cafile=str(self.ssl_cafile) if self.ssl_cafile else None,
                certfile=str(self.ssl_certfile) if self.ssl_certfile else None,
                keyfile=str(self.ssl_keyfile) if self.ssl_keyfile else None,
            )
        if self.security_protocol.startswith("SASL"):
            kw["sasl_mechanism"] = self.sasl_mechanism or "PLAIN"
            kw["sasl_plain_username"] = self.sasl_username
            kw["sasl_plain_password"] = (
                self.sasl_password.get_secret_value() if self.sasl_password else None
            )
        return kw


def _empty_secret_is_unset(v: object) -> object:
    """An empty secret (e.g. a blank key in a Kubernetes Secret) means "not set"."""
    if v == "" or (isinstance(v, SecretStr) and v.get_secret_value() == ""):
        return None
    return v


class TemporalSettings(BaseSettings):
    """Temporal connection (env prefix ``TEMPORAL_``, the names temporalio.envconfig uses)."""

    model_config = SettingsConfigDict(env_prefix="TEMPORAL_", **_FROZEN)

    address: str = "127.0.0.1:7233"
    namespace: str = "default"
    task_queue: str = "ingest-activities"
    api_key: SecretStr | None = None
    tls: bool = False
    tls_server_ca_cert_path: Path | None = None
    tls_client_cert_path: Path | None = None
    tls_client_key_path: Path | None = None

    _blank_key = field_validator("api_key", mode="before")(
        classmethod(lambda cls, v: _empty_secret_is_unset(v))
    )


class DatabaseSettings(BaseSettings):
    """PostgreSQL (``DATABASE_URL``; the password inside it is a secret)."""

    model_config = SettingsConfigDict(**_FROZEN)

    url: SecretStr = Field(
        SecretStr("postgresql://postgres@127.0.0.1:55432/ingest"), alias="DATABASE_URL"
    )
    pool_min: int = Field(1, ge=0, alias="DATABASE_POOL_MIN")
    pool_max: int = Field(10, ge=1, alias="DATABASE_POOL_MAX")

    @field_validator("url")
    @classmethod
    def _postgres_scheme(cls, v: SecretStr) -> SecretStr:
        if not v.get_secret_value().startswith(("postgres://", "postgresql://")):
            raise ValueError("DATABASE_URL must start with postgresql:// or postgres://")
        return v


class ProcessSettings(BaseSettings):
    """What every process shares: log level, metrics port, shutdown grace."""

    model_config = SettingsConfigDict(env_prefix="INGEST_", **_FROZEN)

    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    log_format: Literal["text", "json"] = "text"
    metrics_host: str = "0.0.0.0"
    # 0 disables the HTTP server (/metrics, /healthz, /readyz). Unset, each process
    # takes its own default (METRICS_PORTS) so they can run side by side on one host.
    metrics_port: int = Field(9400, ge=0, le=65535)
    shutdown_grace_seconds: float = Field(30.0, gt=0)
    # OpenTelemetry traces (pipeline/tracing.py, docs/tracing.md); the standard OTEL_*
    # variables configure the exporter, service name, sampler and resource.
    tracing: bool = False


class Settings(BaseSettings):
    """The whole configuration of one process."""

    model_config = _FROZEN

    kafka: KafkaSettings = Field(default_factory=KafkaSettings)
    temporal: TemporalSettings = Field(default_factory=TemporalSettings)
    database: DatabaseSettings = Field(default_factory=DatabaseSettings)
    process: ProcessSettings = Field(default_factory=ProcessSettings)


class ConfigError(IngestError):
    """A setting is invalid; the message names it."""


# Default /metrics ports, one per process, so that `ingest ingress`, `ingest router`
# and `ingest worker` started side by side on one host do not collide (and match
# what `ingest run` gives them). INGEST_METRICS_PORT or --metrics-port overrides.
METRICS_PORTS = {"ingress": 9400, "router": 9401, "worker": 9402, "ops": 9403, "relay": 9404}
METRICS_PORT_ENV = "INGEST_METRICS_PORT"

S = TypeVar("S", bound=BaseSettings)


def build(cls: type[S], **overrides: object) -> S:
    """``cls`` from the environment plus the overrides that were given (None = not given).

    The one place settings are validated: a bad value raises :class:`ConfigError`
    naming each bad environment variable (see :func:`describe_error`).
    """
    given = {k: v for k, v in overrides.items() if v is not None}
    try:
        return cls(**given)  # type: ignore[arg-type]
    except ValidationError as exc:
        raise ConfigError(describe_error(exc, cls)) from None


def _env_is_set(name: str) -> bool:
    return any(k.upper() == name for k in os.environ)


def load_settings(component: str | None = None, **overrides: object) -> Settings:
    """The shared settings of one process, from the environment plus CLI overrides.

    ``overrides`` take dotted keys as ``group__field`` (e.g. ``kafka__raw_topic``).
    ``component`` (a key of :data:`METRICS_PORTS`) picks the default metrics port
    when neither the flag nor ``INGEST_METRICS_PORT`` gives one.
    """
    groups: dict[str, dict[str, object]] = {}
    for key, value in overrides.items():
        group, _, field = key.partition("__")
        groups.setdefault(group, {})[field] = value
    process = groups.setdefault("process", {})
    if component is not None and process.get("metrics_port") is None:
        if not _env_is_set(METRICS_PORT_ENV):
            process["metrics_port"] = METRICS_PORTS[component]
    return Settings(
        kafka=build(KafkaSettings, **groups.get("kafka", {})),
        temporal=build(TemporalSettings, **groups.get("temporal", {})),
        database=build(DatabaseSettings, **groups.get("database", {})),
        process=build(ProcessSettings, **process),
    )


def describe_error(exc: ValidationError, cls: type[BaseSettings]) -> str:
    """One ``invalid setting ENV_NAME: message`` per error, naming the environment variable."""
    prefix = cls.model_config.get("env_prefix", "") or ""
    lines = []
    for err in exc.errors():
        field = str(err["loc"][0]) if err["loc"] else "?"
        info = cls.model_fields.get(field)
        if info is not None and info.alias:
            env = info.alias
        elif info is None and field.upper() == field:  # the error names the alias itself
            env = field
        else:
            env = f"{prefix}{field}".upper()
        lines.append(f"invalid setting {env}: {err['msg']}")
    return "; ".join(lines)
