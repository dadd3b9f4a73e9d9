-- Scarce-resource permits (workers/permits). A permit is a running
-- PermitSlotWorkflow with id permit:{resource}:{slot}; these tables hold what
-- Temporal cannot: the declared capacity, and a monotonic fencing token per slot.
CREATE TABLE IF NOT EXISTS permit_resources (
    name                text PRIMARY KEY,
    capacity            integer NOT NULL CHECK (capacity >= 1),
    lease_seconds       integer NOT NULL CHECK (lease_seconds >= 1),
    backoff_seconds     double precision NOT NULL DEFAULT 5 CHECK (backoff_seconds > 0),
    max_backoff_seconds double precision NOT NULL DEFAULT 60 CHECK (max_backoff_seconds > 0),
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now()
);

-- One row per slot ever acquired. `token` rises by one on every acquire (the
-- fencing token); `run_id` is the PermitSlotWorkflow run that holds (or last
-- held) the slot. `ended_at` is set when that run ends by release or lease expiry.
CREATE TABLE IF NOT EXISTS permit_slots (
    resource      text NOT NULL,
    slot          text NOT NULL,
    token         bigint NOT NULL,
    run_id        text NOT NULL,
    holder        text NOT NULL,       -- the task id (TaskInstanceWorkflow id) holding it
    lease_seconds integer NOT NULL,
    acquired_at   timestamptz NOT NULL DEFAULT now(),
    ended_at      timestamptz,
    outcome       text,                -- 'released' | 'lease_expired' (null while held)
    PRIMARY KEY (resource, slot)
);
