"""Settings only the worker process reads (env prefix ``INGEST_``).

Kept here rather than in ``pipeline.settings`` because no other process uses
them; a bad value raises :class:`pipeline.settings.ConfigError` naming the variable.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from pipeline.settings import SettingConflict, build
from workers.handlers.webhook_secrets import SecretSource


class WorkerSettings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="INGEST_", frozen=True, extra="ignore", populate_by_name=True
    )

    max_concurrent_activities: int = Field(100, ge=1)
    max_concurrent_workflow_tasks: int = Field(100, ge=2)
    # Workflows kept in memory between their tasks (the SDK's sticky cache; 0 = none, every
    # task replays its history). It bounds the worker's memory under a backlog: each cached
    # run holds about 30 KB, and glibc and pymalloc keep a peak's pages afterwards
    # (docs/soak.md). At least max_concurrent_workflow_tasks, as the SDK requires.
    max_cached_workflows: int = Field(1000, ge=0)
    # Concurrent workflow-task polls, and the share of them on the task queue's normal
    # partition, where the first task of every new workflow waits (the rest poll this
    # worker's sticky queue). The SDK's 5 and 0.2 leave one poller for every new run
    # and child, so new runs queue behind sticky polls (bench.e2e: docs/benchmarks.md).
    workflow_task_pollers: int = Field(10, ge=2)
    nonsticky_poll_ratio: float = Field(0.5, gt=0, le=1)
    # Serialization contexts read from the workflow instance, not through the sandbox
    # (workers.sandbox.SandboxRunner), which saves worker CPU on every run (measured by
    # bench.e2e.runner_ab: docs/benchmarks.md). false = the SDK's runner as it ships: a
    # way back should an SDK release change what this relies on.
    sandbox_direct_contexts: bool = True
    # The Temporal SDK's own Prometheus metrics (task latencies, poll counts); 0 = off.
    sdk_metrics_port: int = Field(0, ge=0, le=65535)
    # Where `emit` tasks publish when their config names no topic.
    emit_topic: str = Field("ingest.tasks", min_length=1)
    # Extra task handlers: "mymod:func,othermod" (see workers.handlers.registry).
    task_handlers: str = ""
    # Lease of a run's flow.concurrency slot: the backstop that frees it when Temporal
    # cannot say whether its holder still runs (a closed holder's slot is freed by the
    # first waiter). Keep it above the longest run of such an activity (docs/flow-control.md).
    flow_slot_lease_seconds: float = Field(3600.0, gt=0)
    # Webhook secrets by reference (workers.handlers.webhook_secrets): the environment
    # variables a definition's headers_from_env / url_from_env may name start with this
    # prefix ("" allows any, DATABASE_URL included); headers_from_file names files in the dir.
    webhook_secret_env_prefix: str = "WEBHOOK_"
    webhook_secrets_dir: Path = Path("/run/secrets")

    @model_validator(mode="after")
    def _cache_holds_every_task(self) -> WorkerSettings:
        if 0 < self.max_cached_workflows < self.max_concurrent_workflow_tasks:
            raise SettingConflict(
                "INGEST_MAX_CACHED_WORKFLOWS",
                f"{self.max_cached_workflows} is below INGEST_MAX_CONCURRENT_WORKFLOW_TASKS "
                f"({self.max_concurrent_workflow_tasks}); the SDK needs a cached workflow for "
                "every concurrent task (or 0: no cache)",
            )
        return self

    def webhook_secrets(self) -> SecretSource:
        """Where the worker's webhook tasks resolve their secret references."""
        return SecretSource(self.webhook_secret_env_prefix, self.webhook_secrets_dir)


def load_worker_settings(**overrides: object) -> WorkerSettings:
    """Environment plus non-None CLI overrides; :class:`ConfigError` names the bad variable."""
    return build(WorkerSettings, **overrides)
