"""What every process shares, and the ``ingest`` command line.

* Settings and plumbing: :mod:`pipeline.settings`, :mod:`pipeline.logs`,
  :mod:`pipeline.metrics`, :mod:`pipeline.runtime` (signals, health and metrics HTTP).
* Clients: :mod:`pipeline.clients` (Kafka, Temporal, PostgreSQL), :mod:`pipeline.kafka`
  (aiokafka clients, DLQ headers, the retriable test), :mod:`pipeline.db` (pools, migrations).
* Shared logic: :mod:`pipeline.starter` (the one starter of ``RunActivityWorkflow``),
  :mod:`pipeline.offsets` (the router's contiguous commit point), :mod:`pipeline.retry`
  (the one backoff and the one RetryPolicy).
* The command line: :mod:`pipeline.cli` (``ingest``), :mod:`pipeline.command`,
  :mod:`pipeline.flags`, :mod:`pipeline.client_flags`, :mod:`pipeline.run_cmd`,
  :mod:`pipeline.migrate_cmd`, :mod:`pipeline.temporal_setup`, :mod:`pipeline.parts`
  (which worker parts ``ingest worker`` serves).
* :mod:`pipeline.stack`: the local stack of real services (one module per service).
"""
