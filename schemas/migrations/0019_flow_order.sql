-- flow.ordered (issue 39, router/flow/order.py, workers/flow/order*.py,
-- docs/flow-control.md "Ordered"): runs of an activity that share a key value run one at
-- a time, in the order of their events on the events topic.
--
-- Each (activity, key value) is a line (flow_order_lines). The router gives each run of
-- an ordered activity its place in its line (flow_order_places.seq) as it reads the
-- partition, before the run is started: one flow_order_assign call per batch, in batch
-- order (= offset order per partition). A run's turn comes when no place before it in
-- its line is still open (done_at NULL). The worker's finish step closes the place
-- (done_at) when the run succeeded, was cancelled, timed out or was skipped; a failed
-- run keeps its place open, holding the line, until an operator releases it.

CREATE TABLE IF NOT EXISTS flow_order_lines (
    activity_id uuid   NOT NULL,
    key         text   NOT NULL,  -- the key's value; '' when the flow declares no key
    next_seq    bigint NOT NULL DEFAULT 1,
    PRIMARY KEY (activity_id, key)
);

CREATE TABLE IF NOT EXISTS flow_order_places (
    workflow_id      text        PRIMARY KEY,  -- the run's contract id: one place per run
    run_id           uuid        NOT NULL UNIQUE,
    activity_id      uuid        NOT NULL,
    key              text        NOT NULL,
    seq              bigint      NOT NULL,
    event_id         text,
    source_topic     text,
    source_partition integer,
    source_offset    bigint,
    placed_at        timestamptz NOT NULL DEFAULT now(),
    -- Set once: the run succeeded, was cancelled, timed out or skipped (its outcome), its
    -- message was dead-lettered ('dropped'), or an operator released it ('released').
    done_at          timestamptz,
    outcome          text,
    released_by      text,
    UNIQUE (activity_id, key, seq)
);
-- The open places of a line, in order: the turn check and the head of a line.
CREATE INDEX IF NOT EXISTS flow_order_places_open ON flow_order_places (activity_id, key, seq)
    WHERE done_at IS NULL;
-- Retention: closed places older than the ledger's retention are pruned with it.
CREATE INDEX IF NOT EXISTS flow_order_done_at ON flow_order_places (done_at)
    WHERE done_at IS NOT NULL;

-- The places of one batch's runs, in the arrays' order (the batch's order). Idempotent
-- per workflow id: a run that has a place gets it back (seq, done), never a second one.
--
-- Every line the batch touches is locked first, in one stable order (activity, key):
-- two routers assigning overlapping batches at once (a rebalance: the old owner still
-- finishing a batch the new owner reads again from the committed offset) serialize per
-- line and never deadlock. Under the lock a run's place is looked up, else the line's
-- next number is taken.
CREATE OR REPLACE FUNCTION flow_order_assign(
    p_activity uuid[], p_key text[], p_wid text[], p_run uuid[], p_event text[],
    p_topic text[], p_partition integer[], p_offset bigint[]
) RETURNS TABLE (workflow_id text, seq bigint, done boolean)
LANGUAGE plpgsql AS $$
DECLARE
    r      record;
    i      integer;
    v_seq  bigint;
    v_done boolean;
BEGIN
    FOR r IN SELECT DISTINCT t.a, t.k FROM unnest(p_activity, p_key) AS t(a, k)
             ORDER BY t.a, t.k LOOP
        INSERT INTO flow_order_lines (activity_id, key) VALUES (r.a, r.k)
            ON CONFLICT ON CONSTRAINT flow_order_lines_pkey DO NOTHING;
        PERFORM 1 FROM flow_order_lines l WHERE l.activity_id = r.a AND l.key = r.k
            FOR UPDATE;
    END LOOP;
    FOR i IN 1 .. coalesce(array_length(p_wid, 1), 0) LOOP
        SELECT p.seq, p.done_at IS NOT NULL INTO v_seq, v_done
            FROM flow_order_places p WHERE p.workflow_id = p_wid[i];
        IF NOT FOUND THEN
            UPDATE flow_order_lines l SET next_seq = l.next_seq + 1
                WHERE l.activity_id = p_activity[i] AND l.key = p_key[i]
                RETURNING l.next_seq - 1 INTO v_seq;
            INSERT INTO flow_order_places AS p (workflow_id, run_id, activity_id, key, seq,
                    event_id, source_topic, source_partition, source_offset)
                VALUES (p_wid[i], p_run[i], p_activity[i], p_key[i], v_seq, p_event[i],
                        p_topic[i], p_partition[i], p_offset[i])
                ON CONFLICT ON CONSTRAINT flow_order_places_pkey DO NOTHING;
            -- Placed meanwhile in another line (its key read otherwise): that place holds.
            SELECT p.seq, p.done_at IS NOT NULL INTO v_seq, v_done
                FROM flow_order_places p WHERE p.workflow_id = p_wid[i];
        END IF;
        workflow_id := p_wid[i];
        seq := v_seq;
        done := v_done;
        RETURN NEXT;
    END LOOP;
END;
$$;

-- The open places: not closed (done_at NULL), and their run has not ended in a way that
-- frees the line. Any path that ends a run (its finish step, the last task's step that
-- marks it succeeded, a cancel, a timeout, resume --skip-held) thus moves the line; a
-- failed run's place stays open. workers/flow/order_store.FREES_LINE lists the same
-- statuses (tests/integration/flow/test_ordered_sql.py compares the two).
CREATE OR REPLACE VIEW flow_order_open AS
    SELECT p.workflow_id, p.run_id, p.activity_id, p.key, p.seq, p.event_id, p.placed_at,
           r.status AS run_status, r.finished_at AS run_finished_at
    FROM flow_order_places p LEFT JOIN activity_runs r ON r.run_id = p.run_id
    WHERE p.done_at IS NULL
      AND (r.status IS NULL OR r.status NOT IN ('succeeded', 'cancelled', 'timed_out', 'skipped'));

-- Per line with an open place: its head (the first open place), its run's status, and
-- how many open places wait behind it. A line whose head failed is blocked.
CREATE OR REPLACE VIEW flow_order_heads AS
    SELECT DISTINCT ON (o.activity_id, o.key) o.activity_id, o.key, o.workflow_id, o.seq,
           o.run_status, o.run_finished_at,
           (SELECT count(*) - 1 FROM flow_order_open w
             WHERE w.activity_id = o.activity_id AND w.key = o.key) AS waiting
    FROM flow_order_open o ORDER BY o.activity_id, o.key, o.seq;
