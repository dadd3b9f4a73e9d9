-- Windows against Temporal's payload limit (issue 34; docs/flow-control.md, "Sizes").
--
-- bytes: the window's events as Temporal's JSON counts them (schemas.flow.json_bytes),
--        kept by the router as it assigns; a batch closes before the next event would
--        take it over its budget (closed_by 'bytes').
-- dead_lettered: a window whose run no payload can carry, or whose start Temporal
--        refused for good. Its members went to the DLQ through the outbox, in the
--        transaction that set this state, and were deleted from flow_members, so a
--        re-drive of a DLQ record (or a redelivery) assigns the event again.
ALTER TABLE flow_windows ADD COLUMN IF NOT EXISTS bytes bigint NOT NULL DEFAULT 0;
ALTER TABLE flow_windows ADD COLUMN IF NOT EXISTS dlq_reason text;
ALTER TABLE flow_windows ADD COLUMN IF NOT EXISTS dlq_detail text;
ALTER TABLE flow_windows ADD COLUMN IF NOT EXISTS dead_lettered_at timestamptz;

-- Windows not started yet: their bytes as PostgreSQL renders their members (close to
-- Temporal's count for ASCII text; the worker measures the run itself before it starts).
UPDATE flow_windows w SET bytes = m.bytes
FROM (
    SELECT window_id, sum(octet_length(event::text)) AS bytes FROM flow_members GROUP BY window_id
) m
WHERE m.window_id = w.id AND w.state <> 'started';

ALTER TABLE flow_windows DROP CONSTRAINT IF EXISTS flow_windows_state_check;
ALTER TABLE flow_windows ADD CONSTRAINT flow_windows_state_check
    CHECK (state IN ('open', 'closed', 'started', 'dead_lettered'));
CREATE INDEX IF NOT EXISTS flow_windows_dead_lettered_at
    ON flow_windows (dead_lettered_at) WHERE state = 'dead_lettered';
