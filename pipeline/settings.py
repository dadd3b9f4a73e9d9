"""Configuration: one frozen settings object per process, built in ``main()``.

Every field reads an environment variable (named in the field's ``alias`` or by
its group's prefix) and may be overridden by a CLI flag. A bad value fails at
start-up with a pydantic error that names the variable; secrets are
``SecretStr`` and never printed (``repr`` shows ``'**********'``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

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

    _blank_password = field_validator("sasl_password", mode="before")(
        classmethod(lambda cls, v: _empty_secret_is_unset(v))
    )

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
    # 0 disables the HTTP server (/metrics, /healthz, /readyz).
    metrics_port: int = Field(9400, ge=0, le=65535)
    shutdown_grace_seconds: float = Field(30.0, gt=0)


class Settings(BaseSettings):
    """The whole configuration of one process."""

    model_config = _FROZEN

    kafka: KafkaSettings = Field(default_factory=KafkaSettings)
    temporal: TemporalSettings = Field(default_factory=TemporalSettings)
    database: DatabaseSettings = Field(default_factory=DatabaseSettings)
    process: ProcessSettings = Field(default_factory=ProcessSettings)


class ConfigError(Exception):
    """A setting is invalid; the message names it."""


def load(**overrides: object) -> Settings:
    """Build settings from the environment plus CLI overrides.

    ``overrides`` take dotted keys as ``group__field`` (e.g. ``kafka__raw_topic``).
    Validation errors are turned into a :class:`ConfigError` naming each bad setting.
    """
    groups: dict[str, dict[str, object]] = {}
    for key, value in overrides.items():
        if value is None:
            continue
        group, _, field = key.partition("__")
        groups.setdefault(group, {})[field] = value
    classes: dict[str, type[BaseSettings]] = {
        "kafka": KafkaSettings,
        "temporal": TemporalSettings,
        "database": DatabaseSettings,
        "process": ProcessSettings,
    }
    built: dict[str, BaseSettings] = {}
    try:
        for name, cls in classes.items():
            built[name] = cls(**groups.get(name, {}))  # type: ignore[arg-type]
    except ValidationError as exc:
        raise ConfigError(describe_error(exc, classes[name])) from None
    return Settings(**built)  # type: ignore[arg-type]


def describe_error(exc: ValidationError, cls: type[BaseSettings]) -> str:
    """One ``invalid setting ENV_NAME: message`` per error, naming the environment variable."""
    prefix = cls.model_config.get("env_prefix", "") or ""
    lines = []
    for err in exc.errors():
        field = str(err["loc"][0]) if err["loc"] else "?"
        info = cls.model_fields.get(field)
        env = info.alias if info is not None and info.alias else f"{prefix}{field}".upper()
        lines.append(f"invalid setting {env}: {err['msg']}")
    return "; ".join(lines)
