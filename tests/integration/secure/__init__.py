"""The secured local stack (``ingest stack up --secure``): the event path over TLS
listeners and a TLS-only PostgreSQL, and the refusals of bad credentials."""
