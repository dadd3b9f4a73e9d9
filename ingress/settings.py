"""Settings only the ingress reads (env prefix ``INGEST_INGRESS_``).

Shared settings (bootstrap servers, topic names, metrics port) stay in
:mod:`pipeline.settings`; this keeps the ingress knobs next to the code that
uses them without widening the shared object every process builds.
"""

from __future__ import annotations

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from ingress.stamping import Strategy, strategy_from_string
from pipeline.retry import BACKOFF_INITIAL, BACKOFF_MAX
from pipeline.settings import build
from schemas.envelope import MAX_EVENT_BYTES


class IngressSettings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="INGEST_INGRESS_", frozen=True, extra="ignore", populate_by_name=True
    )

    # Consumer group on the raw topic(s).
    group: str = "ingest-ingress"
    # source | content | header:NAME (see ingress.stamping).
    strategy: str = "source"
    # Raw messages larger than this, and events stamping makes larger, go to the DLQ with
    # reason too_large: the router reads the same limit (schemas.envelope.MAX_EVENT_BYTES).
    max_event_bytes: int = Field(MAX_EVENT_BYTES, ge=1, alias="INGEST_MAX_EVENT_BYTES")
    # Most messages fetched per batch; a batch is produced, acknowledged, then committed.
    batch_size: int = Field(500, ge=1, le=100_000)
    # At most one offset commit per this interval (0: one after every acknowledged batch).
    # A trickle makes batches of one record, so a commit per batch was one broker request
    # per event; a crash redelivers at most this much more, with the same ids (absorbed).
    commit_interval_ms: int = Field(500, ge=0, le=60_000)
    # How long a partition revoke waits for the in-flight batch before committing
    # what is acknowledged (longer blocks the group's rebalance).
    revoke_wait_seconds: float = Field(10.0, ge=0)
    # Backoff between retries of a retriable produce failure (pipeline.retry's bounds).
    retry_backoff_min_seconds: float = Field(BACKOFF_INITIAL, gt=0)
    retry_backoff_max_seconds: float = Field(BACKOFF_MAX, gt=0)
    # How often pipeline_consumer_lag is refreshed.
    lag_interval_seconds: float = Field(5.0, gt=0)
    # Exactly-once mode (docs/kafka.md, "Transactional ingress"): each raw partition's
    # records, their stamped events and DLQ records, and the raw offsets are committed in
    # one Kafka transaction, by one transactional producer per raw partition.
    transactional: bool = False
    # Most raw records one transaction holds: a fetch takes max(batch_size, this) records,
    # and each partition's share is split into transactions of at most this many. Each
    # transaction costs four coordinator round trips plus the commit markers, so small ones
    # are dear: 100 ran at about 0.1 of plain ingress, 500 at 0.4-0.8, 1000 at 0.5-0.9 (means
    # 0.7-1.0; docs/benchmarks.md). 2000 was faster still, but by its larger fetch (plain
    # ingress gains as much from the same fetch), and a crash redoes, and a read_committed
    # reader waits on, up to twice as many records per partition.
    transaction_records: int = Field(1000, ge=1, le=100_000)
    # The broker aborts a transaction left open this long (a producer that hung): longer than
    # any leader election (~10 s) plus the retries in between, shorter than the time
    # read_committed readers of that partition may be held back after a hang.
    transaction_timeout_seconds: float = Field(60.0, ge=1, le=900)
    # Fault injection for tests: wait this long (or until SIGTERM) between the
    # produce acknowledgements and the offset commit. Never set it in production.
    fault_commit_delay_seconds: float = Field(0.0, ge=0)

    @field_validator("strategy")
    @classmethod
    def _known_strategy(cls, v: str) -> str:
        strategy_from_string(v)
        return v.strip()

    def stamping(self) -> Strategy:
        return strategy_from_string(self.strategy)


def load_ingress_settings(**overrides: object) -> IngressSettings:
    """Environment plus the CLI flags that were given; :class:`ConfigError` names the variable."""
    return build(IngressSettings, **overrides)
