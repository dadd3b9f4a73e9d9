"""Flow control in the router (docs/flow-control.md; docs/architecture.md, "Adding a
flow control"). Which stage each control belongs to is :mod:`schemas.flow.controls`.

* :mod:`router.flow.keys`: the flow keys of one run, read from its event at planning.
* :mod:`router.flow.order`: ``ordered`` (stage ``order``): each run's place in its
  key's line, given in batch order before the messages are routed; ``ingest flow release``.
* :mod:`router.flow.windows`: debounce and batch windows (stage ``window``), decided
  once in PostgreSQL; the window workflow starts their runs.
* :mod:`router.flow.gate`: before any other start, start now, after a delay, or skip
  (stage ``gate``), with :mod:`router.flow.store` (the one ``flow_decide`` call),
  :mod:`router.flow.pacing` (the GCRA parameters of ``throttle`` and ``rate_limit``)
  and :mod:`router.flow.singleton` (asking Temporal whether a holder still runs).
* :mod:`router.flow.cancel`: ``cancel_on``: a cancelling event's runs, found, recorded
  and cancelled through Temporal.
* :mod:`router.flow.skips`: the recorded skips; :mod:`router.flow.listing` and
  :mod:`router.flow.concurrency_view`: ``ingest flow list`` and ``GET /api/flow``.
* :mod:`router.flow.lifecycle_view`: runs cancelled and timed out, for ``ingest flow list``.
* :mod:`router.flow.metrics`: the router's flow metrics.

Decisions are recorded per workflow id in PostgreSQL, so a redelivered or replayed
trigger gets the decision it got the first time.
"""
