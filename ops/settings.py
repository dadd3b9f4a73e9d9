"""Settings only the ops service reads (env prefix ``INGEST_OPS_``).

``INGEST_OPS_TOKEN`` is a ``SecretStr``: its ``repr`` is ``'**********'`` and it
is never logged; one under 32 characters is refused. Without a token, a tokens file
or a trusted proxy header (``ops.identity``) the service refuses to start, unless it
binds to 127.0.0.1 and was started with ``--insecure-local``, which makes a random
token for the process and prints the console URL with it (``app.commands.ops``).
"""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from ops.identity import (
    MIN_TOKEN_CHARS,
    IdentityError,
    check_name,
    load_tokens_file,
    parse_networks,
)
from pipeline.settings import _empty_secret_is_unset, build

LOCALHOST = "127.0.0.1"
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
MIB = 1024 * 1024
# The smallest DLQ peek budget: room for a message as a peek shows it with every field
# at its cap (tests/unit/ops/test_dlq_budget.py: under 56 KiB even when all of it is
# control characters, which JSON writes as six bytes each).
DLQ_PEEK_MIN_BYTES = 64 * 1024
DEFAULT_TRACE_URL_TEMPLATE = "http://127.0.0.1:16686/trace/{trace_id}"  # Jaeger's UI
TRACE_ID = re.compile(r"[0-9a-f]{32}")


class OpsSettings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="INGEST_OPS_", frozen=True, extra="ignore", populate_by_name=True
    )

    host: str = LOCALHOST
    port: int = Field(8080, ge=0, le=65535)  # 0: any free port (tests)
    token: SecretStr | None = None
    # The identity the shared token acts as (audit rows, `by`, `actor`): it names no person.
    token_name: str = "ops-token"
    # Per-person tokens: lines of `name:sha256-hex-of-token` (ops.identity).
    tokens_file: Path | None = None
    # A header an authenticating proxy sets to the person's name (e.g. X-Forwarded-User),
    # believed only on connections from trusted_proxies (addresses or networks, commas).
    identity_header: str | None = None
    trusted_proxies: str = ""
    # Host header values accepted (commas; `name` or `name:port`; `*`: any). Empty: the
    # loopback names with the service's port when it binds to 127.0.0.1, else any.
    allowed_hosts: str = ""
    # The most bytes of a request body, enforced as it streams (413), in every mode.
    max_body_bytes: int = Field(MIB, ge=1024, le=64 * MIB)
    # Swagger UI on /docs (its scripts come from cdn.jsdelivr.net); off by default.
    api_docs: bool = False
    # Wrong tokens from one address in a minute before it is answered 429 (0: no limit).
    auth_failure_limit: int = Field(20, ge=0)
    # How often the pending-fix gauges are recomputed from the database.
    gauge_interval_seconds: float = Field(15.0, gt=0)
    # A DLQ peek reads at most this many messages per partition.
    dlq_peek_max: int = Field(500, ge=1, le=10_000)
    # Bytes, not only messages (DESIGN convention 16; ops.dlq): the most bytes of one DLQ
    # peek's answer (GET /api/dlq, GET /api/dlq/{partition}/{offset}). Keys, values and
    # header values are truncated, and messages that do not fit are left out, counted.
    dlq_peek_max_bytes: int = Field(MIB, ge=DLQ_PEEK_MIN_BYTES, le=64 * MIB)
    # The most record bytes (keys, values, headers) one peek reads from Kafka, newest
    # first; it stops at the record that reaches it. 300 records with 900 KB headers were
    # 270 MB read and served per console refresh without these two.
    dlq_peek_read_max_bytes: int = Field(16 * MIB, ge=DLQ_PEEK_MIN_BYTES, le=1024 * MIB)
    # How long a query or update (approval state, decisions, fixes) waits for a worker to
    # answer before the API answers 503 (no worker polls the task queue, or it is stuck).
    # Not much less: after a worker crash, its workflows' sticky queue holds the next
    # task ~10 s before a new worker gets it (tests/integration/ops/test_restart.py: 10 s
    # answered 503 there).
    temporal_timeout_seconds: float = Field(30.0, gt=0)
    # Where a run's trace is shown (issue 37): ``{trace_id}`` is replaced by the run's
    # 32-hex-digit trace id (``activity_runs.trace_id``). Default: Jaeger's UI on the
    # local stack; for Grafana Tempo e.g. ``https://grafana.example/explore?...{trace_id}``.
    # Empty: no link (the trace id is still shown).
    trace_url_template: str = DEFAULT_TRACE_URL_TEMPLATE

    @property
    def temporal_timeout(self) -> timedelta:
        return timedelta(seconds=self.temporal_timeout_seconds)

    @field_validator("trace_url_template")
    @classmethod
    def _trace_url(cls, v: str) -> str:
        v = v.strip()
        if not v:
            return v
        if not v.startswith(("http://", "https://")):
            raise ValueError("must be an http(s) URL (or empty: no link)")
        if "{trace_id}" not in v:
            raise ValueError("must contain {trace_id}")
        try:
            v.format(trace_id="0" * 32)
        except (KeyError, IndexError, ValueError) as exc:
            raise ValueError(f"only {{trace_id}} may be in braces ({exc!r})") from None
        return v

    def trace_url(self, trace_id: str | None) -> str | None:
        """The link to ``trace_id`` (None: no trace id, not a W3C one, or no template)."""
        if not trace_id or not self.trace_url_template or not TRACE_ID.fullmatch(trace_id):
            return None
        return self.trace_url_template.format(trace_id=trace_id)

    _blank_token = field_validator("token", mode="before")(
        classmethod(lambda cls, v: _empty_secret_is_unset(v))
    )

    @field_validator("token")
    @classmethod
    def _long_token(cls, v: SecretStr | None) -> SecretStr | None:
        if v is not None and len(v.get_secret_value().strip()) < MIN_TOKEN_CHARS:
            raise ValueError(
                f"INGEST_OPS_TOKEN must be at least {MIN_TOKEN_CHARS} characters "
                "(e.g. openssl rand -hex 24)"
            )
        return v

    @field_validator("token_name")
    @classmethod
    def _token_name(cls, v: str) -> str:
        problem = check_name(v)
        if problem is not None:
            raise ValueError(f"the name is {problem}")
        return v

    @field_validator("identity_header", mode="before")
    @classmethod
    def _blank_header(cls, v: object) -> object:
        return (v.strip() or None) if isinstance(v, str) else v

    @field_validator("trusted_proxies")
    @classmethod
    def _proxies(cls, v: str) -> str:
        try:
            parse_networks(v)
        except IdentityError as exc:
            raise ValueError(str(exc)) from None
        return v

    def host_allowed(self, port: int) -> frozenset[str] | None:
        """The ``Host`` values accepted, lower-case (None: any): ``name:port`` matches that
        port only, a bare ``name`` any port. ``port`` is the one the service bound."""
        names = [h.strip().lower() for h in self.allowed_hosts.split(",") if h.strip()]
        if "*" in names:
            return None
        if names:
            return frozenset(names)
        if self.host not in (LOCALHOST, "localhost", "::1"):
            return None
        if port == 0:  # not bound yet (an app built without a server): any port
            return frozenset(LOOPBACK_NAMES)
        return frozenset(f"{name}:{port}" for name in LOOPBACK_NAMES)


def load_ops_settings(**overrides: object) -> OpsSettings:
    """Environment plus non-None CLI overrides; :class:`ConfigError` names the variable."""
    return build(OpsSettings, **overrides)


def startup_problem(cfg: OpsSettings, insecure_local: bool) -> str | None:
    """Why the service must not start with these settings (None: it may).

    ``--insecure-local`` is not a mode without a secret: ``ingest ops`` makes a random
    token for the process when none is set. It only requires the loopback binding and
    the loopback ``Host`` names."""
    if cfg.identity_header and not cfg.trusted_proxies.strip():
        return (
            "INGEST_OPS_IDENTITY_HEADER needs INGEST_OPS_TRUSTED_PROXIES (the addresses of "
            "the proxy that sets it): from anyone else the header would be believed"
        )
    if cfg.tokens_file is not None:
        try:
            people = load_tokens_file(cfg.tokens_file)
        except IdentityError as exc:
            return f"INGEST_OPS_TOKENS_FILE: {exc}"
        if any(name == cfg.token_name for name, _ in people):
            return f"INGEST_OPS_TOKENS_FILE names {cfg.token_name!r}, the shared token's name"
    if insecure_local:
        if cfg.host != LOCALHOST:
            return f"--insecure-local needs INGEST_OPS_HOST={LOCALHOST} (got {cfg.host})"
        if cfg.allowed_hosts.strip():
            return (
                "--insecure-local accepts only 127.0.0.1 and localhost as Host: "
                "unset INGEST_OPS_ALLOWED_HOSTS"
            )
        return None
    if cfg.token is None and cfg.tokens_file is None and not cfg.identity_header:
        return (
            "INGEST_OPS_TOKEN is not set: every endpoint needs a bearer token. Set it "
            "(or INGEST_OPS_TOKENS_FILE, or INGEST_OPS_IDENTITY_HEADER), or bind to "
            f"{LOCALHOST} and pass --insecure-local for a local session with a token "
            "made for the process"
        )
    return None
