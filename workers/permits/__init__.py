"""Scarce-resource permits: a Semaphore on ``permit:{resource}:{slot}`` workflows.

* ``workflow``: ``PermitSlotWorkflow``, one running execution per held slot.
* ``semaphore``: the async context manager workflow code acquires with.
* ``scope``: what TaskInstanceWorkflow wraps its handler execution in.
* ``activities`` / ``store``: fencing tokens and bookkeeping in PostgreSQL.
* ``fencing``: ``ctx.permit`` for handlers, with ``check()``.
* ``part``: the worker part; ``cli``: ``ingest permits list|release``.

See docs/permits.md.
"""
