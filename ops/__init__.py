"""The operator service: an HTTP API and a small web console (``ingest ops``).

Operators act here (fix, skip or abort a paused task, decide approvals, peek at the DLQ,
replay); Grafana stays the dashboard. Everything but the static page is behind
authentication, and who acts is who the credentials name.

* The process and the app: :mod:`ops.service` (uvicorn, /metrics, the gauges),
  :mod:`ops.app` (the FastAPI app and its routes), :mod:`ops.settings`
  (``INGEST_OPS_*``), :mod:`ops.models` (every answer's body), :mod:`ops.errors`.
* The front door: :mod:`ops.guard` (ASGI middleware: Host, authentication before the
  body, content type, body cap), :mod:`ops.identity` (tokens, the tokens file, the
  proxy header), :mod:`ops.auth` (the routes' identity dependency and the ``actor``/
  ``by`` rule), :mod:`ops.headers` (CSP and the other security headers),
  :mod:`ops.json_caps` (size and depth caps of patches and payloads).
* Features: :mod:`ops.tasks` and :mod:`ops.store` (runs, paused tasks, fixes),
  :mod:`ops.approvals`, :mod:`ops.activity_hold`, :mod:`ops.flow_release`,
  :mod:`ops.dlq`, :mod:`ops.replay_adapter`, :mod:`ops.gauges` and :mod:`ops.metrics`
  (the pending-fix gauges), :mod:`ops.codec_api` (Temporal's codec server protocol).
"""
