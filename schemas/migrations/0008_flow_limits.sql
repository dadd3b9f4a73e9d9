-- Flow limits (router/flow, docs/flow-control.md): throttle, rate_limit, singleton.
-- Everything here is decided by the router in one call of flow_decide(), one
-- transaction, before it starts (or skips) a run.

-- GCRA state: one row per (activity, control, key value); '' is the key of a control
-- with no key. `tat` is the theoretical arrival time of the next start; `taken`
-- counts the slots ever taken (one per decided run: a redelivery takes none).
CREATE TABLE IF NOT EXISTS flow_gcra (
    activity_id uuid NOT NULL,
    control     text NOT NULL CHECK (control IN ('throttle', 'rate_limit')),
    key         text NOT NULL,
    tat         timestamptz NOT NULL,
    taken       bigint NOT NULL DEFAULT 1,
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (activity_id, control, key)
);

-- One row per workflow id the flow gate decided: a redelivered or replayed trigger
-- finds its decision here and reuses it (the same delay, the same skip) instead of
-- taking a second slot. Skips are the rows with outcome 'skip'.
CREATE TABLE IF NOT EXISTS flow_decisions (
    workflow_id text PRIMARY KEY,
    activity_id uuid NOT NULL,
    event_id    text,
    outcome     text NOT NULL CHECK (outcome IN ('start', 'skip')),
    reason      text,         -- a skip's: 'rate_limit' | 'singleton'
    key         text,         -- the key value of the control that decided
    start_at    timestamptz,  -- throttled: when Temporal starts the run (start_delay)
    cancelled   text,         -- singleton cancel: the run this one cancelled
    decided_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS flow_decisions_skips
    ON flow_decisions (activity_id, decided_at DESC) WHERE outcome = 'skip';
CREATE INDEX IF NOT EXISTS flow_decisions_decided_at ON flow_decisions (decided_at);

-- Singleton: the run that holds each (activity, key). Set with the decision, cleared
-- by the worker when the run finishes (workers/store.finish_run). A row left by a
-- run that ended otherwise (terminated, timed out) is found stale by the router,
-- which asks Temporal whether the holder still runs before trusting it.
CREATE TABLE IF NOT EXISTS flow_singleton (
    activity_id uuid NOT NULL,
    key         text NOT NULL,
    workflow_id text NOT NULL,
    since       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (activity_id, key)
);
CREATE INDEX IF NOT EXISTS flow_singleton_workflow ON flow_singleton (workflow_id);

-- Throttle: take the next GCRA slot; returns when the run may start.
-- t: the emission interval (period / limit), tau: the burst tolerance, both seconds.
CREATE OR REPLACE FUNCTION flow_throttle_take(
    p_activity uuid, p_key text, p_t float8, p_tau float8, p_now timestamptz
) RETURNS timestamptz LANGUAGE sql AS $$
    INSERT INTO flow_gcra AS g (activity_id, control, key, tat)
    VALUES (p_activity, 'throttle', p_key, p_now + make_interval(secs => p_t))
    ON CONFLICT (activity_id, control, key) DO UPDATE
        SET tat = greatest(g.tat, p_now) + make_interval(secs => p_t), taken = g.taken + 1,
            updated_at = now()
    RETURNING greatest(p_now, tat - make_interval(secs => p_t + p_tau))
$$;

-- Rate limit: take a slot if the trigger conforms (GCRA); false (and no change) if not.
CREATE OR REPLACE FUNCTION flow_rate_take(
    p_activity uuid, p_key text, p_t float8, p_tau float8, p_now timestamptz
) RETURNS boolean LANGUAGE sql AS $$
    WITH took AS (
        INSERT INTO flow_gcra AS g (activity_id, control, key, tat)
        VALUES (p_activity, 'rate_limit', p_key, p_now + make_interval(secs => p_t))
        ON CONFLICT (activity_id, control, key) DO UPDATE
            SET tat = greatest(g.tat, p_now) + make_interval(secs => p_t), taken = g.taken + 1,
            updated_at = now()
            WHERE greatest(g.tat, p_now) <= p_now + make_interval(secs => p_tau)
        RETURNING true
    )
    SELECT EXISTS (SELECT 1 FROM took)
$$;

-- The gate's one call per run. A NULL key means the control is not declared.
-- outcome: 'start' (start_at: throttled start, cancelled: the singleton run to
-- cancel), 'skip' (reason), or 'check': the singleton key is held by `holder`
-- (since `holder_since`), which the router must ask Temporal about and call again
-- with p_sg_checked = holder and p_sg_running = its answer. Nothing is recorded
-- for 'check'. fresh: false when the decision was recorded earlier (reused).
CREATE OR REPLACE FUNCTION flow_decide(
    p_workflow_id text, p_activity uuid, p_event_id text,
    p_rl_key text, p_rl_t float8, p_rl_tau float8,
    p_th_key text, p_th_t float8, p_th_tau float8,
    p_sg_key text, p_sg_mode text, p_sg_checked text, p_sg_running boolean,
    p_now timestamptz
) RETURNS TABLE (outcome text, reason text, start_at timestamptz, cancelled text,
                 holder text, holder_since timestamptz, fresh boolean)
LANGUAGE plpgsql AS $$
DECLARE
    d flow_decisions%ROWTYPE;
    h flow_singleton%ROWTYPE;
    v_start timestamptz;
    v_cancel text;
BEGIN
    -- Claim the workflow id first: a concurrent decider of the same id waits here,
    -- then finds the decision already made.
    INSERT INTO flow_decisions (workflow_id, activity_id, event_id, outcome)
    VALUES (p_workflow_id, p_activity, p_event_id, 'start')
    ON CONFLICT (workflow_id) DO NOTHING;
    IF NOT FOUND THEN
        SELECT * INTO d FROM flow_decisions WHERE workflow_id = p_workflow_id;
        RETURN QUERY SELECT d.outcome, d.reason, d.start_at, d.cancelled,
                            NULL::text, NULL::timestamptz, false;
        RETURN;
    END IF;
    IF p_sg_key IS NOT NULL THEN
        SELECT * INTO h FROM flow_singleton
        WHERE activity_id = p_activity AND key = p_sg_key FOR UPDATE;
        IF FOUND AND h.workflow_id <> p_workflow_id THEN
            IF p_sg_checked IS DISTINCT FROM h.workflow_id THEN
                DELETE FROM flow_decisions WHERE workflow_id = p_workflow_id;
                RETURN QUERY SELECT 'check'::text, NULL::text, NULL::timestamptz, NULL::text,
                                    h.workflow_id, h.since, true;
                RETURN;
            END IF;
            IF p_sg_running THEN
                IF p_sg_mode = 'skip' THEN
                    UPDATE flow_decisions SET outcome = 'skip', reason = 'singleton', key = p_sg_key
                    WHERE workflow_id = p_workflow_id;
                    RETURN QUERY SELECT 'skip'::text, 'singleton'::text, NULL::timestamptz,
                                        NULL::text, h.workflow_id, h.since, true;
                    RETURN;
                END IF;
                v_cancel := h.workflow_id;
            END IF;
        END IF;
    END IF;
    IF p_rl_key IS NOT NULL
       AND NOT flow_rate_take(p_activity, p_rl_key, p_rl_t, p_rl_tau, p_now) THEN
        UPDATE flow_decisions SET outcome = 'skip', reason = 'rate_limit', key = p_rl_key
        WHERE workflow_id = p_workflow_id;
        RETURN QUERY SELECT 'skip'::text, 'rate_limit'::text, NULL::timestamptz, NULL::text,
                            NULL::text, NULL::timestamptz, true;
        RETURN;
    END IF;
    IF p_th_key IS NOT NULL THEN
        v_start := flow_throttle_take(p_activity, p_th_key, p_th_t, p_th_tau, p_now);
    END IF;
    IF p_sg_key IS NOT NULL THEN
        INSERT INTO flow_singleton AS s (activity_id, key, workflow_id)
        VALUES (p_activity, p_sg_key, p_workflow_id)
        ON CONFLICT (activity_id, key) DO UPDATE SET workflow_id = p_workflow_id, since = now();
    END IF;
    UPDATE flow_decisions
    SET start_at = v_start, cancelled = v_cancel, key = coalesce(p_th_key, p_sg_key, p_rl_key)
    WHERE workflow_id = p_workflow_id;
    RETURN QUERY SELECT 'start'::text, NULL::text, v_start, v_cancel,
                        NULL::text, NULL::timestamptz, true;
END
$$;
