-- The trace of a run and of an outbox row (issue 37; docs/tracing.md). Both nullable:
-- written only when the process that writes the row traces (INGEST_TRACING=1).
--
-- activity_runs.trace_id: the W3C trace id (32 hex digits) of the trace the run's
--        workflow belongs to, written by start_run (log_run) from the span it runs in;
--        the ops console links it (INGEST_OPS_TRACE_URL_TEMPLATE). A retried step keeps
--        the first (the insert is insert-or-nothing).
-- outbox.traceparent: the W3C traceparent of the task step that wrote the row; the
--        relay sends it as the record's `traceparent` header (its own `publish` span's,
--        a child of it, when the relay traces too).
ALTER TABLE activity_runs ADD COLUMN IF NOT EXISTS trace_id text;
ALTER TABLE outbox ADD COLUMN IF NOT EXISTS traceparent text;
