-- Flow concurrency (workers/permits/flow_*.py): a run of an activity with
-- flow.concurrency holds a permit slot of resource flow.{activity}[.{uuid5(key)}]
-- (schemas/ids.py flow_resource) while its tasks execute. The slots themselves are
-- permit_slots rows (fencing tokens, holder, lease) and PermitSlotWorkflow runs.

-- One row per resource in use: which activity and key value it stands for (the
-- resource id hashes the key), and the limit the last round asked for. Deleted,
-- with its ended permit_slots rows, when its last holder leaves and nobody waits.
CREATE TABLE IF NOT EXISTS flow_slot_keys (
    resource    text PRIMARY KEY,
    activity_id uuid NOT NULL,
    key         text,                 -- NULL: one limit for the whole activity
    slot_limit  integer NOT NULL CHECK (slot_limit >= 1),
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS flow_slot_keys_activity ON flow_slot_keys (activity_id);

-- The wait queue: a run waiting for a slot. Admitted in (priority, seq) order;
-- seq is given once, on the first round, so a retried round keeps its place.
-- seen_at moves every round: a waiter gone silent (its run terminated) stops
-- counting after a while and is swept by the next release.
CREATE TABLE IF NOT EXISTS flow_waiters (
    resource   text NOT NULL,
    holder     text NOT NULL,          -- the waiting run's workflow id
    priority   smallint NOT NULL CHECK (priority BETWEEN 1 AND 5),
    seq        bigserial,
    arrived_at timestamptz NOT NULL DEFAULT now(),
    seen_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (resource, holder)
);
CREATE INDEX IF NOT EXISTS flow_waiters_order ON flow_waiters (resource, priority, seq);
