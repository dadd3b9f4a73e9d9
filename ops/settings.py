"""Settings only the ops service reads (env prefix ``INGEST_OPS_``).

``INGEST_OPS_TOKEN`` is a ``SecretStr``: its ``repr`` is ``'**********'`` and it
is never logged. Without it the service refuses to start, unless it binds to
127.0.0.1 and was started with ``--insecure-local`` (see ``ops.service``).
"""

from __future__ import annotations

from datetime import timedelta

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from pipeline.settings import _empty_secret_is_unset, build

LOCALHOST = "127.0.0.1"


class OpsSettings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="INGEST_OPS_", frozen=True, extra="ignore", populate_by_name=True
    )

    host: str = LOCALHOST
    port: int = Field(8080, ge=0, le=65535)  # 0: any free port (tests)
    token: SecretStr | None = None
    # How often the pending-fix gauges are recomputed from the database.
    gauge_interval_seconds: float = Field(15.0, gt=0)
    # A DLQ peek reads at most this many messages per partition.
    dlq_peek_max: int = Field(500, ge=1, le=10_000)
    # How long a query or update (approval state, decisions, fixes) waits for a worker to
    # answer before the API answers 503 (no worker polls the task queue, or it is stuck).
    # Not much less: after a worker crash, its workflows' sticky queue holds the next
    # task ~10 s before a new worker gets it (tests/integration/ops/test_restart.py: 10 s
    # answered 503 there).
    temporal_timeout_seconds: float = Field(30.0, gt=0)

    @property
    def temporal_timeout(self) -> timedelta:
        return timedelta(seconds=self.temporal_timeout_seconds)

    _blank_token = field_validator("token", mode="before")(
        classmethod(lambda cls, v: _empty_secret_is_unset(v))
    )


def load_ops_settings(**overrides: object) -> OpsSettings:
    """Environment plus non-None CLI overrides; :class:`ConfigError` names the variable."""
    return build(OpsSettings, **overrides)


def startup_problem(cfg: OpsSettings, insecure_local: bool) -> str | None:
    """Why the service must not start with these settings (None: it may)."""
    if cfg.token is not None:
        return None
    if not insecure_local:
        return (
            "INGEST_OPS_TOKEN is not set: every endpoint needs a bearer token. Set it, "
            f"or bind to {LOCALHOST} and pass --insecure-local for a local session"
        )
    if cfg.host != LOCALHOST:
        return f"--insecure-local needs INGEST_OPS_HOST={LOCALHOST} (got {cfg.host})"
    return None
