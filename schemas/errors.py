"""``IngestError``: the root of every exception the project defines.

Each package keeps its errors next to the code that raises them, under this one
root, so a caller can catch the project's errors apart from a programming error
(``TypeError``, a bare ``ValueError``) and tell a transient failure from a
permanent one by ``retriable``, as aiokafka's ``KafkaError`` does:

* schemas: ``envelope.EnvelopeError`` (bad input; also a ``ValueError``).
* pipeline: ``settings.ConfigError`` (``runtime.BindError``, ``db.SchemaBehind``: migrations
  missing), ``clients.Unreachable`` (retriable), ``kafka.UndecodableBatch`` (a
  record batch no codec here decodes), ``stack.procs.StackError``,
  ``starter.StartRejected``, ``starter.ShutdownRequested``.
* relay: ``progress.ProgressError`` (an unreadable progress record),
  ``refusals.Unpublishable`` (the DLQ refused even a bare record).
* ingress: ``stamping.StampError``, ``delivery.FatalProduceError``,
  ``delivery.DrainTimeout`` (retriable).
* replay: ``session.ReplayError``.
* workers: ``errors.TaskFailed`` and its kinds (workflow outcomes, raised as a
  non-retryable temporalio ``ApplicationError``), ``errors.TaskConfigError``,
  ``handlers.errors.TaskError`` (what a handler raises), the planning, template,
  patch, permits and approvals API errors.
* definitions: ``files.FileError``. ops: ``errors.ApiError`` and its HTTP kinds.

``tests/unit/test_errors.py`` fails on an exception class outside this tree.
"""

from __future__ import annotations

from typing import ClassVar


class IngestError(Exception):
    """Base of the project's errors. ``retriable``: trying again later may succeed."""

    retriable: ClassVar[bool] = False
