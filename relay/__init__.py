"""The outbox relay: publishes the ``outbox`` table exactly once (``ingest relay``)."""
