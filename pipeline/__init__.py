"""What every process shares, and the ``ingest`` command line.

* Settings and plumbing: :mod:`pipeline.settings`, :mod:`pipeline.logs`,
  :mod:`pipeline.metrics`, :mod:`pipeline.runtime` (signals, health and metrics HTTP).
* Clients: :mod:`pipeline.clients` (Kafka, Temporal, PostgreSQL), :mod:`pipeline.kafka`
  (aiokafka clients, DLQ headers, the retriable test), :mod:`pipeline.db` (pools, migrations).
* Shared logic: :mod:`pipeline.starter` (the one starter of ``RunActivityWorkflow``),
  :mod:`pipeline.offsets` (the router's contiguous commit point), :mod:`pipeline.retry`
  (the one backoff and the one RetryPolicy), :mod:`pipeline.rebalance` (the consumer
  group listener of ingress and the router).
* Commands: :mod:`app.command` (the ``Command`` declaration), :mod:`app.dispatch`
  (how every entry point runs and exits), :mod:`app.flags`,
  :mod:`app.client_flags`, and the library's own commands
  (:mod:`app.commands.migrate`, :mod:`pipeline.temporal_setup`). The ``ingest``
  parser itself is :mod:`app.cli`, above every package.
* :mod:`devstack`: the local stack of real services (one module per service).
"""
