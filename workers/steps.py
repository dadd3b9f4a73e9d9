"""What both workflows share: bookkeeping steps as local activities, and error text.

Workflow code, imported by ``workers.run_workflow`` and ``workers.task_workflow``
inside ``workflow.unsafe.imports_passed_through()``: it is loaded once per worker
process, not once per workflow instance. Pure and deterministic (no clock, no I/O
of its own; the steps are local activities).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, TimeoutError

from pipeline.retry import UNTIL_DONE

# Bookkeeping activities only touch PostgreSQL: retry them without limit (a
# database outage delays runs, never fails them), with a capped backoff. A data error
# (a value PostgreSQL refuses, SQLSTATE classes 22, 54, 23) is not retried: the worker's
# interceptor makes it non-retryable (workers.data_errors), and the step fails at once.
DB_RETRY = UNTIL_DONE
DB_TIMEOUT = timedelta(seconds=30)


async def db_step(method: Callable[[Any, Any], Awaitable[Any]], arg: Any) -> Any:
    """A bookkeeping step (one short, idempotent PostgreSQL statement) as a local activity.

    Local, not regular: it runs inside the worker's workflow task and is recorded
    as a marker, so a run costs a handful of server round trips instead of one
    schedule/poll/complete cycle per row written. That is safe here because each
    step is an idempotent upsert; a retry after a worker crash repeats it with the
    same outcome. Task handlers are regular activities (long, heartbeating), except
    short ones, which run through :func:`local_step` with their own retry policy.
    """
    return await workflow.execute_local_activity_method(
        method, arg, start_to_close_timeout=DB_TIMEOUT, retry_policy=DB_RETRY
    )


async def local_step(method: Callable[[Any, Any], Awaitable[Any]], arg: Any, **options: Any) -> Any:
    """A local activity whose failure is raised as a regular activity's would be.

    The SDK raises a failed local activity's own error (ApplicationError, or
    TimeoutError), where a regular activity's failure arrives wrapped in an
    ActivityError. Wrapping it here lets one failure path (pause-and-fix,
    ``describe``, the task's ``failed`` row) serve both kinds of handler run.
    A cancellation is not a failure and passes through unchanged.
    """
    try:
        return await workflow.execute_local_activity_method(method, arg, **options)
    except (ApplicationError, TimeoutError) as exc:
        name = getattr(method, "__name__", "local activity")
        raise ActivityError(
            f"local activity {name} failed",
            scheduled_event_id=0,
            started_event_id=0,
            identity="",
            activity_type=name,
            activity_id="",
            retry_state=None,
        ) from exc


def describe(exc: BaseException) -> str:
    """``Type: message`` of the innermost cause (what task rows store as last_error)."""
    cause = exc
    while cause.__cause__ is not None:
        cause = cause.__cause__
    if isinstance(cause, ApplicationError) and cause.type:
        return f"{cause.type}: {cause.message}"
    return f"{type(cause).__name__}: {cause}"
