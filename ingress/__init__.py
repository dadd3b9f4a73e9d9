"""``ingest ingress``: raw topic(s) -> stamped events topic, bad input -> the DLQ.

* :mod:`ingress.service`: the loop (fetch a batch, transform, deliver, commit) and
  the rebalance listener, which delegates to :meth:`Ingress.on_revoked`.
* :mod:`ingress.records`: one raw message -> one outgoing record (event or DLQ).
* :mod:`ingress.stamping`: the stable ``event_id`` of an event that has none.
* :mod:`ingress.delivery`: produce a batch until every record is acknowledged.
* :mod:`ingress.transactions`: opt-in transactional ingress (a transaction per chunk).
* :mod:`ingress.traces`: the span per raw record that starts an event's trace (tracing on).
* :mod:`ingress.acks`: which records Kafka acknowledged, and the commit point that gives.
* :mod:`ingress.metrics`: ingress's own metrics (the shared ones are :mod:`pipeline.metrics`).
* :mod:`ingress.settings`: ``INGEST_INGRESS_*``; :mod:`app.commands.ingress`: the subcommand.
"""
