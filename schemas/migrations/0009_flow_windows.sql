-- Debounce and batch windows (schemas/flow.py; docs/flow-control.md). The router
-- assigns each event to a window here, once: a redelivered or replayed event finds
-- its row in flow_members and is absorbed, so it never opens a second window or joins
-- a second batch. A window's run id is derived from its members (schemas/ids.py).
CREATE TABLE IF NOT EXISTS flow_windows (
    id              bigserial PRIMARY KEY,
    activity_id     uuid NOT NULL,
    kind            text NOT NULL CHECK (kind IN ('debounce', 'batch')),
    -- The flow key's value; '' when the control has no key (one window per activity).
    key             text NOT NULL,
    -- open: takes events; closed: its members are final, its run not yet acknowledged;
    -- started: Temporal acknowledged its run (started or already started).
    state           text NOT NULL DEFAULT 'open' CHECK (state IN ('open', 'closed', 'started')),
    size            integer NOT NULL DEFAULT 0,
    -- full | timeout (batch); quiet | max_wait (debounce)
    closed_by       text,
    run_workflow_id text UNIQUE,
    opened_at       timestamptz NOT NULL DEFAULT now(),
    last_event_at   timestamptz NOT NULL DEFAULT now(),
    closed_at       timestamptz,
    started_at      timestamptz
);
-- At most one open window per (activity, key).
CREATE UNIQUE INDEX IF NOT EXISTS flow_windows_one_open
    ON flow_windows (activity_id, key, kind) WHERE state = 'open';
CREATE INDEX IF NOT EXISTS flow_windows_unstarted
    ON flow_windows (activity_id) WHERE state <> 'started';
CREATE INDEX IF NOT EXISTS flow_windows_started_at ON flow_windows (started_at);

CREATE TABLE IF NOT EXISTS flow_members (
    activity_id      uuid NOT NULL,
    event_id         text NOT NULL,
    window_id        bigint NOT NULL REFERENCES flow_windows (id) ON DELETE CASCADE,
    -- 1, 2, ... in the order the window received its events
    position         integer NOT NULL,
    event            jsonb NOT NULL,
    source_topic     text,
    source_partition integer,
    source_offset    bigint,
    added_at         timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (activity_id, event_id)
);
CREATE INDEX IF NOT EXISTS flow_members_window ON flow_members (window_id, position);
