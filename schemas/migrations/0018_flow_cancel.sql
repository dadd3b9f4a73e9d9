-- flow.cancel_on (issue 39, router/flow/cancel.py, docs/flow-control.md "Cancel on"):
-- an event of a named type cancels the unfinished runs of an activity whose match key
-- equals the one read from the cancelling event.
--
-- The run's side is recorded by flow_decide, with its decision (p_cx_key: the run's
-- match keys, one per distinct set of `our_path`s of its rules, each a hash of the
-- path/value pairs). The cancelling side records each cancelling event once per
-- activity (flow_cancel_events): its first processing time is the line between the
-- runs it cancels (decided before) and the runs it leaves alone (decided after), so a
-- redelivered or replayed cancel event cancels nothing that started after it.

-- The match keys of each gated run of an activity with cancel_on (one row per key).
CREATE TABLE IF NOT EXISTS flow_cancel_keys (
    activity_id uuid NOT NULL,
    key         text NOT NULL,
    workflow_id text NOT NULL,
    decided_at  timestamptz NOT NULL,
    PRIMARY KEY (activity_id, key, workflow_id)
);
CREATE INDEX IF NOT EXISTS flow_cancel_keys_decided_at ON flow_cancel_keys (decided_at);

-- Each cancelling event, once per activity it concerns: `first_at` is when the router
-- first processed it (kept on redelivery and replay).
CREATE TABLE IF NOT EXISTS flow_cancel_events (
    event_id    text NOT NULL,
    activity_id uuid NOT NULL,
    key         text NOT NULL,
    first_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (event_id, activity_id)
);
CREATE INDEX IF NOT EXISTS flow_cancel_events_first_at ON flow_cancel_events (first_at);

-- Why a run was asked to stop, where its worker reads it when the cancellation reaches
-- it (workers/store.finish_run copies it to activity_runs.ended_by). The first
-- request wins: a run two events cancel names the first.
CREATE TABLE IF NOT EXISTS flow_cancel_requests (
    workflow_id  text PRIMARY KEY,
    activity_id  uuid NOT NULL,
    ended_by     text NOT NULL,  -- 'cancel_on:<event_id>'
    requested_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS flow_cancel_requests_at ON flow_cancel_requests (requested_at);

-- The cancelling side, in one transaction: record the event (once), then the runs of
-- `p_activity` with match key `p_key` decided before the event's first processing,
-- minus those whose run row is finished; each gets its cancel request recorded (the
-- first wins). Returns the workflow ids to cancel through Temporal (again on a
-- redelivery: Temporal's cancel is idempotent) and whether the event is new (fresh).
CREATE OR REPLACE FUNCTION flow_cancel_take(p_event_id text, p_activity uuid, p_key text)
RETURNS TABLE (workflow_ids text[], fresh boolean)
LANGUAGE plpgsql AS $$
DECLARE
    v_first timestamptz;
    v_fresh boolean;
BEGIN
    INSERT INTO flow_cancel_events (event_id, activity_id, key)
    VALUES (p_event_id, p_activity, p_key)
    ON CONFLICT (event_id, activity_id) DO NOTHING;
    v_fresh := FOUND;
    SELECT e.first_at INTO v_first FROM flow_cancel_events e
    WHERE e.event_id = p_event_id AND e.activity_id = p_activity;
    INSERT INTO flow_cancel_requests (workflow_id, activity_id, ended_by)
    SELECT k.workflow_id, p_activity, 'cancel_on:' || p_event_id
    FROM flow_cancel_keys k
    WHERE k.activity_id = p_activity AND k.key = p_key AND k.decided_at < v_first
    ON CONFLICT ON CONSTRAINT flow_cancel_requests_pkey DO NOTHING;
    RETURN QUERY
        SELECT coalesce(array_agg(k.workflow_id ORDER BY k.decided_at), '{}'), v_fresh
        FROM flow_cancel_keys k
        LEFT JOIN activity_runs r ON r.workflow_id = k.workflow_id
        WHERE k.activity_id = p_activity AND k.key = p_key AND k.decided_at < v_first
          AND (r.run_id IS NULL OR r.status IN ('running', 'held'));
END
$$;

-- flow_decide (latest before: 0008) with cancel_on's parameter: p_cx_key, the run's
-- match keys (NULL: no cancel_on), recorded with a 'start' decision, after throttle.
DROP FUNCTION IF EXISTS flow_decide(text, uuid, text, text, float8, float8, text, float8,
                                    float8, text, text, text, boolean, timestamptz);
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
    p_cx_key text[],
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
    -- cancel_on: the run's match keys, with the decision's time (a run that starts is
    -- one a cancelling event processed later may cancel; a skipped trigger never is).
    IF p_cx_key IS NOT NULL THEN
        INSERT INTO flow_cancel_keys (activity_id, key, workflow_id, decided_at)
        SELECT p_activity, k, p_workflow_id, now() FROM unnest(p_cx_key) AS k
        ON CONFLICT DO NOTHING;
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

-- A task the run's cancellation stopped (cancel_on, a timeout): neither run to its end
-- nor failed (schemas/status.py TaskStatus.CANCELLED).
ALTER TABLE task_instances DROP CONSTRAINT IF EXISTS task_instances_status_check;
ALTER TABLE task_instances ADD CONSTRAINT task_instances_status_check
    CHECK (status IN ('pending', 'running', 'pending_fix', 'succeeded', 'failed', 'skipped',
                      'duplicate', 'cancelled'));
