"""What every process shares: the library. Imports only :mod:`schemas`.

* Settings and plumbing: :mod:`pipeline.settings`, :mod:`pipeline.logs`,
  :mod:`pipeline.metrics` (the shared metrics and the helpers every feature's own
  metrics use), :mod:`pipeline.runtime` (signals, health and metrics HTTP),
  :mod:`pipeline.memory` (glibc's ``malloc_trim`` on a timer: a heap's free pages back to
  the system after a backlog).
* Clients: :mod:`pipeline.clients` (Kafka, Temporal, PostgreSQL), :mod:`pipeline.kafka`
  (aiokafka clients, DLQ headers, the retriable test), :mod:`pipeline.kafka_oauth` (SASL
  OAUTHBEARER token providers), :mod:`pipeline.db` (pools, migrations, DSN redaction).
* Payload encryption: :mod:`pipeline.codec` (the AES-256-GCM payload codec and the
  converter every Temporal client uses), :mod:`pipeline.codec_keys` (its ``INGEST_CODEC_*``
  settings and keys; docs/security.md), :mod:`pipeline.secret_files` (a secret file read
  within a byte cap: the keys file, webhook secrets).
* Shared logic: :mod:`pipeline.starter` (the one starter of ``RunActivityWorkflow``),
  :mod:`pipeline.offsets` (the router's contiguous commit point), :mod:`pipeline.retry`
  (the one backoff, the one retry loop and the one RetryPolicy), :mod:`pipeline.rebalance`
  (the consumer group listener of ingress and the router), :mod:`pipeline.lag` (consumer lag in
  seconds, for ingress and the router), :mod:`pipeline.temporal_setup` (a
  namespace's search attributes), :mod:`pipeline.tracing` (OpenTelemetry traces,
  off unless ``INGEST_TRACING=1``; docs/tracing.md).

The command line is :mod:`app`; the local stack is :mod:`devstack` (``stack/``).
"""
