"""Scarce-resource permits: a Semaphore on ``permit:{resource}:{slot}`` workflows.

* ``workflow``: ``PermitSlotWorkflow``, one running execution per held slot.
* ``semaphore``: the async context manager workflow code acquires with.
* ``scope``: what TaskInstanceWorkflow wraps its handler execution in.
* ``activities`` / ``store``: fencing tokens and bookkeeping in PostgreSQL.
* ``fencing``: ``ctx.permit`` for handlers, with ``check()``.
* ``apply``: the permits step of ``ingest activities apply``; ``report``: what
  ``ingest permits list`` and ``GET /api/permits`` show.
* ``metrics``: the permit metrics.
* ``part``: the worker part; ``ingest permits list|release`` is
  :mod:`app.commands.permits`.

See docs/permits.md.
"""
