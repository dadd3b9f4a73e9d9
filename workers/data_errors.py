"""PostgreSQL data errors are never retried in the worker: one seam for every activity.

A statement that PostgreSQL refuses for what it was given, not for its own state, fails
the same way on every attempt: a NUL that jsonb cannot hold (22P05) or that text cannot
(22021), a value too large for its index (54000), a CHECK or NOT NULL it breaks (23514,
23502). Retried, such an error never ends: the bookkeeping steps retry without limit
(``workers.steps``, ``UNTIL_DONE``), so before this module a task whose claim PostgreSQL
refused kept its run ``running``, and its flow slot, for ever.

:class:`DataErrorInterceptor` (registered by ``workers.worker.build_worker``) turns such
an error, raised by any activity, regular or local, into a non-retryable
``ApplicationError`` whose ``type`` is the asyncpg error class (e.g.
``UntranslatableCharacterError``) and whose message starts with ``SQLSTATE <code>``:
``describe`` then gives ``UntranslatableCharacterError: SQLSTATE 22P05 (data exception)
...``, which is what the failed task's ``last_error`` says. The workflow decides what
a failure means: a handler step's failure fails the task, or pauses it under
``on_failure: pause``; a bookkeeping step's failure (the claim) fails the task, whose
row the "failed" step then writes if the claim did not (``store.fail_unclaimed``); the
run ends ``failed`` and releases its flow slot (``TaskInstanceWorkflow``,
``RunActivityWorkflow``). The commonest cause, a long idempotency key, no longer fails
at all: ``store.stored_key`` stores a key over 2 KiB as its SHA-256.

Why an activity interceptor, and not a wrapper in the store layer: the worker's
activities write through several stores (``workers.store``, the permits', the
approvals', the fixes' audit, other parts' own) and handlers may use PostgreSQL
themselves. A wrapper would have to be applied, and kept applied, to each statement;
the interceptor sees every activity of every part, with no change to any of them, and
only what escapes it: an error an activity handles itself (``ON CONFLICT``, the
best-effort steps that catch and log) never reaches it.

What is retried still (re-raised unchanged, so the activity's retry policy applies):
every other class (connection 08, resources 53, operator intervention 57,
serialization and deadlock 40, ...), and any error that is not a PostgreSQL one.
A unique or exclusion conflict (23505, 23P01) is what the code's own ``ON CONFLICT``
and re-reads expect from a concurrent writer, and a retry resolves it: it is retried,
but only up to :data:`CONFLICT_ATTEMPTS` attempts, after which it is refused like the
rest (a conflict that every attempt meets is not a race).
"""

from __future__ import annotations

import logging
from typing import Any

import asyncpg
from temporalio import activity
from temporalio.exceptions import ApplicationError
from temporalio.worker import (
    ActivityInboundInterceptor,
    ExecuteActivityInput,
    Interceptor,
)

log = logging.getLogger(__name__)

# The SQLSTATE classes that a retry cannot fix, with PostgreSQL's names for them.
DATA_CLASSES: dict[str, str] = {
    "22": "data exception",
    "23": "integrity constraint violation",
    "54": "program limit exceeded",
}
# Class 23 conflicts with a concurrent writer: retried up to CONFLICT_ATTEMPTS attempts.
CONFLICTS = frozenset({"23505", "23P01"})  # unique_violation, exclusion_violation
CONFLICT_ATTEMPTS = 5
# The refusal's message is kept short: it becomes a task's last_error and a failure in
# history, and a server detail may quote the offending value (a 3 KB key).
MAX_MESSAGE = 600


def postgres_error(exc: BaseException) -> asyncpg.PostgresError | None:
    """The PostgreSQL error ``exc`` is, or was raised from (``raise ... from``), if any."""
    seen: BaseException | None = exc
    for _ in range(20):  # a cause chain is short; a cycle must not hang the worker
        if seen is None:
            return None
        if isinstance(seen, asyncpg.PostgresError):
            return seen
        seen = seen.__cause__
    return None


def refusal(err: asyncpg.PostgresError, attempt: int = 1) -> ApplicationError | None:
    """The non-retryable error ``err`` becomes on attempt ``attempt``; None: retry it."""
    state = str(getattr(err, "sqlstate", "") or "")
    kind = DATA_CLASSES.get(state[:2])
    if kind is None or (state in CONFLICTS and attempt < CONFLICT_ATTEMPTS):
        return None
    text = str(getattr(err, "message", None) or err)
    detail = getattr(err, "detail", None)
    if detail:
        text = f"{text} ({detail})"
    where = [f"{k} {v}" for k in ("table", "constraint") if (v := getattr(err, f"{k}_name", None))]
    if where:
        text = f"{text} [{', '.join(where)}]"
    message = f"SQLSTATE {state} ({kind}), not retried: {text}".replace("\x00", "\\u0000")
    if len(message) > MAX_MESSAGE:
        message = message[: MAX_MESSAGE - 3] + "..."
    return ApplicationError(message, type=type(err).__name__, non_retryable=True)


class _Inbound(ActivityInboundInterceptor):
    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        try:
            return await self.next.execute_activity(input)
        except Exception as exc:
            err = postgres_error(exc)
            refused = None if err is None else refusal(err, activity.info().attempt)
            if refused is None:
                raise
            info = activity.info()
            # The statement's traceback, once: the failure below is not chained to it.
            log.warning(
                "%s of %s refused by PostgreSQL: %s",
                info.activity_type, info.workflow_id, refused.message, exc_info=exc,
            )  # fmt: skip
            # Not chained: the workflow's ``describe`` reports the innermost cause, and
            # that must be this refusal (class and SQLSTATE), not asyncpg's bare message.
            raise refused from None


class DataErrorInterceptor(Interceptor):
    """Every activity of the worker: a PostgreSQL data error fails it without retry."""

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _Inbound(next)
