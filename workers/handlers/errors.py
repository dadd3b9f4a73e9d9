"""What a task handler raises: :class:`PermanentTaskError` fails the task at once,
:class:`RetryableTaskError` (or any other exception) is retried by Temporal.

A module of its own so that code the handler context refers to (e.g.
``workers.permits.fencing``) can subclass them without importing the context.
"""

from __future__ import annotations

from schemas.errors import IngestError


class TaskError(IngestError):
    """Base of handler errors: :class:`PermanentTaskError` or :class:`RetryableTaskError`."""


class PermanentTaskError(TaskError):
    """Retrying cannot help (bad config, rejected request): fail the task now."""


class RetryableTaskError(TaskError):
    """A transient failure (5xx, timeout): let Temporal retry with backoff."""

    retriable = True
