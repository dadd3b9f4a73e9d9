"""The statuses of a run (``activity_runs.status``) and of a task (``task_instances.status``).

One ``StrEnum`` each: a member is a ``str``, so it compares equal to, and is
stored, logged and sent over the Temporal wire as, its plain value (histories and
rows are unchanged). The database CHECK constraints of migration
``0006_status_checks.sql`` allow exactly these values; ``tests/integration/schemas/
test_status_checks.py`` compares the two.

Workflow and activity inputs keep ``status: str`` fields: an activity then answers
a value outside the enum with a clear non-retryable error of its own, where a typed
field would fail the payload's decoding (and be retried forever).
"""

from __future__ import annotations

from enum import StrEnum


class RunStatus(StrEnum):
    RUNNING = "running"  # from log_run until finish_run (or its last task succeeded)
    SUCCEEDED = "succeeded"
    FAILED = "failed"  # a task failed, or planning did
    HELD = "held"  # its activity is paused: no task starts until it is resumed (or skipped)
    CANCELLED = "cancelled"  # by a cancel_on event (activity_runs.ended_by names it)
    TIMED_OUT = "timed_out"  # past flow.timeouts.start or .finish (ended_by says which)
    SKIPPED = "skipped"  # held, then skipped on resume (ingest activities resume --skip-held)


class TaskStatus(StrEnum):
    PENDING = "pending"  # claimed, not started
    RUNNING = "running"
    PENDING_FIX = "pending_fix"  # paused after a permanent failure (workers.fixes)
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    SKIPPED = "skipped"  # by an operator, or behind an approval that was not given
    DUPLICATE = "duplicate"  # another task holds its idempotency key
    CANCELLED = "cancelled"  # stopped by its run's cancellation (flow.cancel_on, flow.timeouts)


# What finish_run may write: a run's outcome.
RUN_OUTCOMES: tuple[str, ...] = tuple(
    s.value
    for s in (
        RunStatus.SUCCEEDED,
        RunStatus.FAILED,
        RunStatus.CANCELLED,
        RunStatus.TIMED_OUT,
        RunStatus.SKIPPED,
    )
)
# Task outcomes a run counts; the rest of its tasks are duplicates.
TASK_OUTCOMES: tuple[str, ...] = tuple(
    s.value
    for s in (TaskStatus.SUCCEEDED, TaskStatus.FAILED, TaskStatus.SKIPPED, TaskStatus.CANCELLED)
)
# What a workflow may ask set_task_state for: a duplicate is decided by the claim.
TASK_TRANSITIONS: tuple[str, ...] = tuple(s.value for s in TaskStatus if s != TaskStatus.DUPLICATE)
# The run outcomes that free the run's place in its flow.ordered line (a failure holds
# it): workers/flow/order_store.py closes on them, the flow_order_open view (migration
# 0019) reads them, router/flow/order.py prunes by them.
FREES_ORDER_LINE: tuple[str, ...] = tuple(
    s.value
    for s in (RunStatus.SUCCEEDED, RunStatus.CANCELLED, RunStatus.TIMED_OUT, RunStatus.SKIPPED)
)
