-- Approval tasks (workers/approvals): one row per approval task, and its audit trail.
-- Written by the record_approval local activity; every write is safe to repeat.
CREATE TABLE IF NOT EXISTS approvals (
    task_id      text PRIMARY KEY,            -- task-{run_id}:approval:{index} (the workflow id)
    run_id       uuid NOT NULL,
    activity_id  uuid NOT NULL,
    -- waiting | escalated | changes_requested | approved | rejected | auto_rejected | expired
    status       text NOT NULL,
    round        integer NOT NULL DEFAULT 1,  -- +1 per resubmission
    approvers    text[] NOT NULL,
    escalate_to  text[] NOT NULL DEFAULT '{}',
    deadline     timestamptz,                 -- of the current phase; NULL once closed
    payload      jsonb NOT NULL DEFAULT '{}'::jsonb,
    last_seq     integer NOT NULL,            -- newest audit entry this row reflects
    requested_at timestamptz NOT NULL,
    updated_at   timestamptz NOT NULL DEFAULT now(),
    closed_at    timestamptz
);
CREATE INDEX IF NOT EXISTS approvals_open ON approvals (status, deadline) WHERE closed_at IS NULL;
CREATE INDEX IF NOT EXISTS approvals_run ON approvals (run_id);

CREATE TABLE IF NOT EXISTS approval_events (
    task_id        text NOT NULL REFERENCES approvals (task_id),
    seq            integer NOT NULL,          -- 0, 1, ... across continue-as-new
    at             timestamptz NOT NULL,      -- workflow time
    -- requested | reminder | escalated | decision | resubmitted | auto_rejected | expired
    kind           text NOT NULL,
    round          integer NOT NULL,
    actor          text,
    decision       text,                      -- approve | reject | request_changes
    reason         text,
    waited_seconds double precision,
    payload        jsonb,                     -- a resubmission's new payload
    recorded_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (task_id, seq)
);
