-- Core tables of the idempotency contract.
CREATE TABLE IF NOT EXISTS activities (
    id                  uuid PRIMARY KEY,
    name                text NOT NULL,
    enabled             boolean NOT NULL DEFAULT true,
    -- {"type": "event", "event_type": ...} or
    -- {"type": "cron", "cron": ..., "timezone": ..., "misfire_policy": ..., "catchup_limit": 10}
    trigger             jsonb NOT NULL,
    -- Legacy compatibility metadata only: never read by schedule execution.
    dedupe_key_strategy text,
    tasks               jsonb NOT NULL DEFAULT '[]'::jsonb,
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT activities_trigger_type CHECK (trigger->>'type' IN ('event', 'cron'))
);
CREATE INDEX IF NOT EXISTS activities_event_type
    ON activities ((trigger->>'event_type')) WHERE enabled AND trigger->>'type' = 'event';

CREATE TABLE IF NOT EXISTS activity_runs (
    run_id               uuid PRIMARY KEY,
    activity_id          uuid NOT NULL,
    workflow_id          text NOT NULL UNIQUE,
    trigger_kind         text NOT NULL CHECK (trigger_kind IN ('event', 'cron')),
    event_id             text,
    scheduled_for        timestamptz,
    context_window_start timestamptz,
    context_window_end   timestamptz,
    status               text NOT NULL DEFAULT 'running',
    started_at           timestamptz NOT NULL DEFAULT now(),
    finished_at          timestamptz
);
CREATE INDEX IF NOT EXISTS activity_runs_activity ON activity_runs (activity_id, started_at);

CREATE TABLE IF NOT EXISTS task_instances (
    id              text PRIMARY KEY,          -- task-{run_id}:{task_type}:{index}
    run_id          uuid NOT NULL,
    task_type       text NOT NULL,
    index           integer NOT NULL,
    idempotency_key text,
    payload         jsonb NOT NULL DEFAULT '{}'::jsonb,
    status          text NOT NULL DEFAULT 'pending',
    attempts        integer NOT NULL DEFAULT 0,
    last_error      text,
    -- Set when the idempotency key was already held: the task holding it.
    duplicate_of    text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX IF NOT EXISTS task_instances_idempotency_key
    ON task_instances (idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX IF NOT EXISTS task_instances_run ON task_instances (run_id);
