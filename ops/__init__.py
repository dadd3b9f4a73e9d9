"""The operator service: an HTTP API and a small web console (``ingest ops``).

Operators act here (fix, skip or abort a paused task, peek at the DLQ, replay);
Grafana stays the dashboard. Everything is behind a bearer token.
"""
