-- The transactional outbox of `emit` tasks (docs/kafka.md, "Emit exactly once: the
-- outbox relay"). A row is written in the same transaction that marks its task
-- succeeded (workers/store.py finish_with_outbox), and published by `ingest relay`.
--
-- id:      the task id (task-{run_id}:{task_type}:{index}), so a retried attempt
--          inserts nothing twice (ON CONFLICT (id) DO NOTHING); it is also the
--          dedupe id every published record carries in its `task_id` header.
-- txid:    the writing transaction's 64-bit id. The relay publishes in (txid, seq)
--          order and only rows whose txid is below the oldest transaction still
--          running (pg_snapshot_xmin of a fresh snapshot): every such transaction has
--          ended, so no row can appear later below the relay's progress. seq alone is
--          not safe: sequence numbers are taken at insert, not at commit, so a row with
--          a smaller seq may commit after one with a larger seq was already published.
-- seq:     insert order within one transaction (and a tie-breaker).
CREATE TABLE IF NOT EXISTS outbox (
    id          text PRIMARY KEY,
    txid        xid8 NOT NULL DEFAULT pg_current_xact_id(),
    seq         bigint GENERATED ALWAYS AS IDENTITY,
    topic       text NOT NULL,
    key         bytea,
    headers     jsonb NOT NULL DEFAULT '[]'::jsonb,
    body        bytea NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX IF NOT EXISTS outbox_order ON outbox (txid, seq);

-- The relay's progress as last mirrored from Kafka (the truth is the progress topic,
-- written in the same Kafka transaction as the records). Written after each commit,
-- so it is never ahead of Kafka: pruning and the depth/lag metrics read it.
CREATE TABLE IF NOT EXISTS outbox_relay (
    transactional_id text PRIMARY KEY,
    txid             xid8 NOT NULL,
    seq              bigint NOT NULL,
    updated_at       timestamptz NOT NULL DEFAULT now()
);
