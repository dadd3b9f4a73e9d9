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
import ssl
from pathlib import Path
from typing import Literal, TypeVar

from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
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
    # Required under SASL_*, refused otherwise (no silent PLAIN): see _kafka_problems.
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"] | None = None
    sasl_username: str | None = None
    sasl_password: SecretStr | None = None
    # OAUTHBEARER: module:attr of a token provider (pipeline/kafka_oauth.py), and the
    # principal of the built-in pipeline.kafka_oauth:UnsecuredJwtProvider.
    sasl_oauth_token_provider: str | None = None
    sasl_oauth_subject: str | None = None
    ssl_cafile: Path | None = None
    ssl_certfile: Path | None = None
    ssl_keyfile: Path | None = None
    ssl_password: SecretStr | None = None  # of an encrypted KAFKA_SSL_KEYFILE
    ssl_check_hostname: bool = True
    # auto: create missing application topics (with topic_configs); check: create
    # nothing, only verify they exist (managed clusters that refuse topic settings).
    create_topics: Literal["auto", "check"] = "auto"
    request_timeout_ms: int = Field(30_000, ge=1000)
    # What a consumer's fetch asks the broker to gather before it answers: at least
    # fetch_min_bytes, or whatever came within fetch_max_wait_ms (aiokafka's defaults, 1
    # byte and 500 ms: at a trickle every record is a fetch of its own). A larger minimum
    # costs the broker fewer fetches at low rates and adds up to the wait to each hop's
    # latency (docs/kafka.md#fetch-waits).
    fetch_min_bytes: int = Field(1, ge=1, le=50 * 1024 * 1024)
    fetch_max_wait_ms: int = Field(500, ge=0, le=30_000)
    # How this project's producers (ingress, the router's DLQ, replay, emit tasks) compress
    # their batches. Consumers read every codec whatever this says.
    compression_type: Literal["none", "gzip", "snappy", "lz4", "zstd"] = "none"
    # Static group membership (KIP-345): this process's group.instance.id in the consumer
    # groups it joins (ingress, router, replay). Unset or empty: dynamic membership. It must
    # be unique per process within a group (e.g. a StatefulSet pod's name, docs/kafka.md):
    # the broker fences one of two members that share it.
    group_instance_id: str | None = None

    _blank_password = field_validator("sasl_password", "ssl_password", mode="before")(
        classmethod(lambda cls, v: _empty_secret_is_unset(v))
    )
    _blank_is_unset = field_validator(
        "sasl_username",
        "sasl_oauth_token_provider",
        "sasl_oauth_subject",
        "ssl_cafile",
        "ssl_certfile",
        "ssl_keyfile",
        mode="before",
    )(classmethod(lambda cls, v: _blank_is_none(v)))

    @field_validator("sasl_mechanism", "security_protocol", "create_topics", mode="before")
    @classmethod
    def _spelling(cls, v: object) -> object:
        if not isinstance(v, str):
            return v
        v = v.strip()
        if not v:
            return None  # blank: unset (only KAFKA_SASL_MECHANISM may be)
        return v.lower() if v.lower() in ("auto", "check") else v.upper()

    @model_validator(mode="after")
    def _consistent(self) -> KafkaSettings:
        if problem := _kafka_problems(self):
            raise SettingConflict(*problem)
        return self

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

    def ssl_context(self) -> ssl.SSLContext:
        """The TLS context of SSL and SASL_SSL: system CAs or ``KAFKA_SSL_CAFILE``, the
        client certificate (mTLS) if given, hostname checks unless turned off."""
        password = self.ssl_password.get_secret_value() if self.ssl_password else ""
        ctx = ssl.create_default_context(
            ssl.Purpose.SERVER_AUTH, cafile=str(self.ssl_cafile) if self.ssl_cafile else None
        )
        if self.ssl_certfile is not None:
            # A callable, so that an encrypted key without KAFKA_SSL_PASSWORD fails
            # instead of OpenSSL prompting on the terminal.
            ctx.load_cert_chain(
                self.ssl_certfile,
                self.ssl_keyfile,
                password=lambda: password,
            )
        if not self.ssl_check_hostname:
            ctx.check_hostname = False  # the chain is still verified
        return ctx

    def client_kwargs(self) -> dict[str, object]:
        """Keyword arguments shared by every aiokafka client we build.

        The settings were checked when loaded (:func:`_kafka_problems`), so what is
        given here is what is used: nothing is ignored, nothing defaults in silence.
        """
        kw: dict[str, object] = {
            "bootstrap_servers": self.bootstrap_servers,
            "security_protocol": self.security_protocol,
            "request_timeout_ms": self.request_timeout_ms,
        }
        if self.security_protocol in ("SSL", "SASL_SSL"):
            kw["ssl_context"] = self.ssl_context()
        if self.security_protocol.startswith("SASL"):
            kw["sasl_mechanism"] = self.sasl_mechanism
            if self.sasl_mechanism == "OAUTHBEARER":
                from pipeline import kafka_oauth

                assert self.sasl_oauth_token_provider is not None
                try:
                    kw["sasl_oauth_token_provider"] = kafka_oauth.load_token_provider(
                        self.sasl_oauth_token_provider, self
                    )
                except ValueError as exc:
                    env = getattr(exc, "env", "KAFKA_SASL_OAUTH_TOKEN_PROVIDER")
                    raise ConfigError(f"invalid setting {env}: {exc}") from None
            else:
                kw["sasl_plain_username"] = self.sasl_username
                kw["sasl_plain_password"] = (
                    self.sasl_password.get_secret_value() if self.sasl_password else None
                )
        return kw


class SettingConflict(IngestError, ValueError):
    """A setting that is wrong given the others; ``env`` names the variable to fix."""

    def __init__(self, env: str, message: str) -> None:
        super().__init__(message)
        self.env = env


def _blank_is_none(v: object) -> object:
    return None if isinstance(v, str) and not v.strip() else v


def _missing_file(env: str, path: Path | None) -> tuple[str, str] | None:
    if path is not None and not path.is_file():
        return env, f"no such file: {path}"
    return None


def _kafka_problems(k: KafkaSettings) -> tuple[str, str] | None:
    """The first inconsistency among the Kafka settings, as (variable, message)."""
    protocol = k.security_protocol
    sasl = protocol.startswith("SASL")
    tls = protocol in ("SSL", "SASL_SSL")
    given = f"KAFKA_SECURITY_PROTOCOL={protocol}"
    sasl_settings: dict[str, object] = {
        "KAFKA_SASL_MECHANISM": k.sasl_mechanism,
        "KAFKA_SASL_USERNAME": k.sasl_username,
        "KAFKA_SASL_PASSWORD": k.sasl_password,
        "KAFKA_SASL_OAUTH_TOKEN_PROVIDER": k.sasl_oauth_token_provider,
    }
    tls_settings: dict[str, object] = {
        "KAFKA_SSL_CAFILE": k.ssl_cafile,
        "KAFKA_SSL_CERTFILE": k.ssl_certfile,
        "KAFKA_SSL_KEYFILE": k.ssl_keyfile,
        "KAFKA_SSL_PASSWORD": k.ssl_password,
        "KAFKA_SSL_CHECK_HOSTNAME": None if k.ssl_check_hostname else False,
    }
    if not sasl:
        for env, value in sasl_settings.items():
            if value is not None:
                return env, f"is set but {given} uses no SASL: use SASL_SSL or SASL_PLAINTEXT"
    if not tls:
        for env, tls_value in tls_settings.items():
            if tls_value is not None:
                return env, f"is set but {given} uses no TLS: use SSL or SASL_SSL"
    if sasl:
        mech = k.sasl_mechanism
        if mech is None:
            return (
                "KAFKA_SASL_MECHANISM",
                f"required with {given}: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER",
            )
        if mech == "OAUTHBEARER":
            for env in ("KAFKA_SASL_USERNAME", "KAFKA_SASL_PASSWORD"):
                if sasl_settings[env] is not None:
                    return env, "is not used by KAFKA_SASL_MECHANISM=OAUTHBEARER: unset it"
            if k.sasl_oauth_token_provider is None:
                return (
                    "KAFKA_SASL_OAUTH_TOKEN_PROVIDER",
                    "required with KAFKA_SASL_MECHANISM=OAUTHBEARER: module:attr of a token"
                    " provider (pipeline.kafka_oauth:UnsecuredJwtProvider for tests)",
                )
        else:
            if k.sasl_oauth_token_provider is not None:
                return (
                    "KAFKA_SASL_OAUTH_TOKEN_PROVIDER",
                    f"is only used with KAFKA_SASL_MECHANISM=OAUTHBEARER, not {mech}",
                )
            for env in ("KAFKA_SASL_USERNAME", "KAFKA_SASL_PASSWORD"):
                if sasl_settings[env] is None:
                    return env, f"required with KAFKA_SASL_MECHANISM={mech}"
    if tls:
        for env, path in (
            ("KAFKA_SSL_CAFILE", k.ssl_cafile),
            ("KAFKA_SSL_CERTFILE", k.ssl_certfile),
            ("KAFKA_SSL_KEYFILE", k.ssl_keyfile),
        ):
            if problem := _missing_file(env, path):
                return problem
        if k.ssl_keyfile is not None and k.ssl_certfile is None:
            return "KAFKA_SSL_CERTFILE", "required with KAFKA_SSL_KEYFILE (mTLS needs both)"
        if k.ssl_certfile is not None and k.ssl_keyfile is None:
            if b"PRIVATE KEY-----" not in k.ssl_certfile.read_bytes():
                return "KAFKA_SSL_KEYFILE", "required with KAFKA_SSL_CERTFILE (mTLS needs both)"
        if k.ssl_password is not None and k.ssl_certfile is None:
            return "KAFKA_SSL_PASSWORD", "is set but there is no KAFKA_SSL_CERTFILE/KEYFILE"
        if problem := _tls_loads(k):
            return problem
    if sasl and k.sasl_mechanism == "OAUTHBEARER" and k.sasl_oauth_token_provider:
        from pipeline import kafka_oauth

        try:
            kafka_oauth.check(k.sasl_oauth_token_provider, k)
        except ValueError as exc:
            return getattr(exc, "env", "KAFKA_SASL_OAUTH_TOKEN_PROVIDER"), str(exc)
    return None


def _tls_loads(k: KafkaSettings) -> tuple[str, str] | None:
    """The CA file, certificate and key load (a wrong password fails here, at start-up)."""
    try:
        ssl.create_default_context(cafile=str(k.ssl_cafile) if k.ssl_cafile else None)
    except (ssl.SSLError, ValueError) as exc:
        return "KAFKA_SSL_CAFILE", f"cannot load {k.ssl_cafile}: {exc}"
    if k.ssl_certfile is None:
        return None
    try:
        k.ssl_context()
    except (ssl.SSLError, ValueError) as exc:
        env = "KAFKA_SSL_PASSWORD" if k.ssl_keyfile is not None else "KAFKA_SSL_CERTFILE"
        return (
            env,
            f"cannot load KAFKA_SSL_CERTFILE={k.ssl_certfile} with KAFKA_SSL_KEYFILE="
            f"{k.ssl_keyfile} (a wrong or missing KAFKA_SSL_PASSWORD, or a key that does"
            f" not match the certificate): {exc}",
        )
    return None


def _empty_secret_is_unset(v: object) -> object:
    """An empty secret (e.g. a blank key in a Kubernetes Secret) means "not set"."""
    if v == "" or (isinstance(v, SecretStr) and v.get_secret_value() == ""):
        return None
    return v


class TemporalSettings(BaseSettings):
    """Temporal connection (env prefix ``TEMPORAL_``, the names temporalio.envconfig uses).

    TLS as in ``temporalio.envconfig``: on when ``TEMPORAL_TLS=true``, and implied by an
    API key or any ``TEMPORAL_TLS_*`` option. Unlike envconfig, an explicit
    ``TEMPORAL_TLS=false`` next to an API key or a TLS option is refused rather than
    silently winning (see :func:`_temporal_problems`). Certificates and keys come as
    files (``*_PATH``) or as PEM text (``*_DATA``), never both.
    """

    model_config = SettingsConfigDict(env_prefix="TEMPORAL_", **_FROZEN)

    address: str = "127.0.0.1:7233"
    namespace: str = "default"
    task_queue: str = "ingest-activities"
    api_key: SecretStr | None = None
    tls: bool | None = None  # None: implied by the API key or any TLS option
    tls_server_name: str | None = None  # SNI and the name the certificate must carry
    tls_server_ca_cert_path: Path | None = None
    tls_server_ca_cert_data: str | None = None
    tls_client_cert_path: Path | None = None
    tls_client_cert_data: str | None = None
    tls_client_key_path: Path | None = None
    tls_client_key_data: SecretStr | None = None

    _blank_key = field_validator("api_key", "tls_client_key_data", mode="before")(
        classmethod(lambda cls, v: _empty_secret_is_unset(v))
    )
    _blank_is_unset = field_validator(
        "tls",
        "tls_server_name",
        "tls_server_ca_cert_path",
        "tls_server_ca_cert_data",
        "tls_client_cert_path",
        "tls_client_cert_data",
        "tls_client_key_path",
        mode="before",
    )(classmethod(lambda cls, v: _blank_is_none(v)))

    @model_validator(mode="after")
    def _consistent(self) -> TemporalSettings:
        if problem := _temporal_problems(self):
            raise SettingConflict(*problem)
        return self

    def pem(self, what: Literal["server_ca_cert", "client_cert", "client_key"]) -> bytes | None:
        """One certificate or key as bytes, from its ``*_DATA`` or its ``*_PATH``."""
        data = getattr(self, f"tls_{what}_data")
        if isinstance(data, SecretStr):
            data = data.get_secret_value()
        if data is not None:
            return _pem_text(data).encode()
        path: Path | None = getattr(self, f"tls_{what}_path")
        return path.read_bytes() if path is not None else None

    def tls_enabled(self) -> bool:
        """TLS on: asked for, or implied by an API key or any TLS option."""
        if self.tls is not None:
            return self.tls
        return self.api_key is not None or bool(_temporal_tls_options(self))


def _pem_text(data: str) -> str:
    """PEM text from a variable; ``\\n`` escapes (one-line .env files) become newlines."""
    data = data.strip()
    if "\n" in data or "\\n" not in data:
        return data + "\n"
    return data.replace("\\n", "\n").strip() + "\n"


def _temporal_tls_options(t: TemporalSettings) -> list[str]:
    names = [
        "server_name",
        "server_ca_cert_path",
        "server_ca_cert_data",
        "client_cert_path",
        "client_cert_data",
        "client_key_path",
        "client_key_data",
    ]
    return [f"TEMPORAL_TLS_{n.upper()}" for n in names if getattr(t, f"tls_{n}") is not None]


def _temporal_problems(t: TemporalSettings) -> tuple[str, str] | None:
    """The first inconsistency among the Temporal settings, as (variable, message)."""
    options = _temporal_tls_options(t)
    if t.tls is False:
        if t.api_key is not None:
            return (
                "TEMPORAL_TLS",
                "is false but TEMPORAL_API_KEY is set: an API key is only sent over TLS;"
                " set TEMPORAL_TLS=true or leave it unset",
            )
        if options:
            return (
                "TEMPORAL_TLS",
                f"is false but {options[0]} is set: set TEMPORAL_TLS=true or leave it"
                " unset (any TLS option turns TLS on)",
            )
    for what in ("SERVER_CA_CERT", "CLIENT_CERT", "CLIENT_KEY"):
        field = what.lower()
        path = getattr(t, f"tls_{field}_path")
        data = getattr(t, f"tls_{field}_data")
        if path is not None and data is not None:
            return (
                f"TEMPORAL_TLS_{what}_DATA",
                f"and TEMPORAL_TLS_{what}_PATH are both set: give one",
            )
        if problem := _missing_file(f"TEMPORAL_TLS_{what}_PATH", path):
            return problem
        if data is not None:
            text = data.get_secret_value() if isinstance(data, SecretStr) else data
            if "-----BEGIN " not in text:
                return (
                    f"TEMPORAL_TLS_{what}_DATA",
                    f"is not PEM text (-----BEGIN ...); a file goes in TEMPORAL_TLS_{what}_PATH",
                )
    has_cert = t.tls_client_cert_path is not None or t.tls_client_cert_data is not None
    has_key = t.tls_client_key_path is not None or t.tls_client_key_data is not None
    if has_key and not has_cert:
        return (
            "TEMPORAL_TLS_CLIENT_CERT_PATH",
            "required with a client key (or TEMPORAL_TLS_CLIENT_CERT_DATA): mTLS needs both",
        )
    if has_cert and not has_key:
        return (
            "TEMPORAL_TLS_CLIENT_KEY_PATH",
            "required with a client certificate (or TEMPORAL_TLS_CLIENT_KEY_DATA): mTLS needs both",
        )
    return None


# DATABASE_COMMAND_TIMEOUT's default, also the bound of pipeline.db.create_pool's pools
# built without settings (DatabaseSettings.command_timeout says why 5 s).
COMMAND_TIMEOUT = 5.0


class DatabaseSettings(BaseSettings):
    """PostgreSQL (``DATABASE_URL``; the password inside it is a secret)."""

    model_config = SettingsConfigDict(**_FROZEN)

    url: SecretStr = Field(
        SecretStr("postgresql://postgres@127.0.0.1:55432/ingest"), alias="DATABASE_URL"
    )
    pool_min: int = Field(1, ge=0, alias="DATABASE_POOL_MIN")
    pool_max: int = Field(10, ge=1, alias="DATABASE_POOL_MAX")
    # Seconds one statement may take before the client gives up on it (asyncpg's
    # command_timeout): a query sent into a half-open link, or stuck behind a lock, ends
    # in TimeoutError and its loop retries, instead of holding its caller until the link
    # is finally closed (issue 40). Retention deletes get PRUNE_TIMEOUT (pipeline/db.py).
    # 5 s, not more: the pipeline's statements are single-row OLTP that take milliseconds,
    # and on a dead link asyncpg holds the connection another bound for its cancel request,
    # so the bound, twice, is how long a run's step and the router's ledger stay stuck
    # after the link comes back (20 s made that 40 s: the soak's recovery, docs/soak.md).
    command_timeout: float = Field(COMMAND_TIMEOUT, gt=0, le=3600, alias="DATABASE_COMMAND_TIMEOUT")

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
    # Seconds between calls of glibc's malloc_trim, which gives the heap's free pages back
    # after a backlog drains (pipeline/memory.py; docs/soak.md); 0 = never.
    malloc_trim_seconds: float = Field(60.0, ge=0)


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
        cause = (err.get("ctx") or {}).get("error")
        if isinstance(cause, SettingConflict):
            lines.append(f"invalid setting {cause.env}: {cause}")
            continue
        lines.append(f"invalid setting {env}: {err['msg']}")
    return "; ".join(lines)
