"""The local stack of real services, without Docker (docs/local-stack.md).

A distribution of its own (``stack/pyproject.toml``): a development and test tool,
not installed into the production image. ``ingest stack`` (:mod:`app.commands.stack`)
calls :mod:`devstack.manager`.

* :mod:`devstack.settings`: ``INGEST_STACK_*``; :mod:`devstack.manager`: up, down,
  status, build.
* Kafka: :mod:`devstack.kafka` (one KRaft node), :mod:`devstack.kafka_cluster`
  (several), :mod:`devstack.maven` (the broker jars), :mod:`devstack.kafka_inspect`.
* Temporal: :mod:`devstack.temporal` (the dev server), :mod:`devstack.temporal_server`
  (the real server on PostgreSQL), :mod:`devstack.temporal_build` (``go install``),
  :mod:`devstack.temporal_secure` (the real server secured: TLS, client certificates, JWTs).
* PostgreSQL: :mod:`devstack.postgres`.
* Traces (``up --tracing``): :mod:`devstack.jaeger` (Jaeger, built once from source).
* Network faults: :mod:`devstack.toxiproxy` (Toxiproxy, built once from source, and a
  client of its API; ``build --proxied``).
* Secured servers (``up --secure``): :mod:`devstack.certs` (the stack's CA and the
  certificates it issues), :mod:`devstack.secure` (Kafka's secure listeners, passwords,
  what a client sets), :mod:`devstack.postgres_tls` (the TLS-only PostgreSQL).
* :mod:`devstack.procs` and :mod:`devstack.service`: processes with pid files and logs,
  and what every service offers.
"""
