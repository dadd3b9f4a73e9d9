"""The workers' errors: how a task ends in workflow code, and a bad task config.

:class:`TaskFailed` is a workflow outcome, not a bug: an operator aborted the task,
an approval was not given, a permit's resource is not declared. It is a
temporalio ``ApplicationError`` with ``type`` set to the kind's class name and
``non_retryable=True`` (the way Temporal's samples signal outcomes), so it keeps
its type on the wire and no retry policy repeats it. ``TaskInstanceWorkflow``
catches exactly these (and a failed activity) to mark the task failed; any other
exception is a bug and fails the workflow task, so a worker fix can replay it.
Raised from workflow code, their messages come from workflow state only
(deterministic).
"""

from __future__ import annotations

from temporalio.exceptions import ApplicationError

from schemas.errors import IngestError


class WorkerError(IngestError):
    """Base of the workers' own errors."""


class TaskFailed(ApplicationError, WorkerError):
    """The task ends ``failed`` with this message (``describe`` shows ``Kind: message``)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, type=type(self).__name__, non_retryable=True)


class TaskAborted(TaskFailed):
    """An operator aborted a paused task (workers.fixes)."""


class ApprovalRejected(TaskFailed):
    """The approval was not given (rejected, auto-rejected, expired): the task fails."""


class PermitUnavailable(TaskFailed):
    """The task's permit resource cannot be held (not declared): a definition problem."""


class TaskSettled(WorkerError):
    """Not a failure: the step that claims a task found it settled already (a duplicate
    of another task, or finished by an earlier run), so its handler did not run.
    Raised inside the handler loop; ``TaskInstanceWorkflow`` returns ``status``."""

    def __init__(self, status: str) -> None:
        super().__init__(f"task is {status} already")
        self.status = status


class TaskConfigError(WorkerError, ValueError):
    """A task's ``config`` is invalid; the message names the key. ``plan_tasks`` finds it
    first (the plan fails); in workflow code it fails the task."""
