"""Settings only the ops service reads (env prefix ``INGEST_OPS_``).

``INGEST_OPS_TOKEN`` is a ``SecretStr``: its ``repr`` is ``'**********'`` and it
is never logged. Without it the service refuses to start, unless it binds to
127.0.0.1 and was started with ``--insecure-local`` (see ``ops.service``).
"""

from __future__ import annotations

import re
from datetime import timedelta

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from pipeline.settings import _empty_secret_is_unset, build

LOCALHOST = "127.0.0.1"
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
