"""``ingest router``: events topic -> ``RunActivityWorkflow`` starts, committing only what is done.

* :mod:`router.service`: the live loop, its commits and the rebalance listener, which
  delegates to :meth:`Router.on_revoked`.
* :mod:`router.routing`: one message -> its starts (shared with replay).
* :mod:`router.catalog`: which activities subscribe to an event type (cached).
* :mod:`router.ledger`: the durable dedupe ledger (``routed_triggers``).
* :mod:`router.budget`: the bytes of the messages in flight (a bound in bytes).
* :mod:`router.flow`: flow control before a start (throttle, windows, ...).
* :mod:`router.metrics`: the router's own metrics.
* :mod:`router.settings`: ``INGEST_ROUTER_*``; :mod:`app.commands.router`: the subcommand.
"""
