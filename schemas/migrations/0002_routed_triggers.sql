-- Durable dedupe ledger: every trigger the router has seen Temporal acknowledge
-- (started, or already started). Temporal forgets closed workflow ids after the
-- namespace retention period; this table does not, so a replay older than the
-- retention still starts nothing twice.
CREATE TABLE IF NOT EXISTS routed_triggers (
    workflow_id      text PRIMARY KEY,
    activity_id      uuid NOT NULL,
    event_id         text,
    scheduled_for    timestamptz,
    source_topic     text,
    source_partition integer,
    source_offset    bigint,
    first_routed_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS routed_triggers_first_routed_at ON routed_triggers (first_routed_at);
