-- Flow concurrency slots held in PostgreSQL alone (workers/permits/flow_*.py): a run of
-- an activity with flow.concurrency holds a permit_slots row of its resource
-- flow.{activity}[.{uuid5(key)}] while its tasks execute; no PermitSlotWorkflow child.
-- Both functions below take the same transaction-scoped advisory lock on the resource:
-- it is the one lock of a flow slot, so admission (count, queue order, claim) and
-- release never interleave. A slot row is held while store.HELD says so (not ended,
-- lease not run out), the same rule as task permits and `ingest flow list`.

-- Admit-and-acquire, one transaction (column references are qualified, and the slot
-- conflict names its constraint: the OUT columns slot, token, ... are variables here).
-- Returns one row:
--   slot/token: the grant (NULL slot: not this run's turn, it is queued or refreshed);
--   waited: seconds since the run first queued (0 when admitted on its first round);
--   fresh: false when the holder already held the slot (a retried or replayed step
--   gets its grant back, the token unchanged);
--   held/ahead: slots held and live waiters ahead of it, as decided.
CREATE OR REPLACE FUNCTION flow_slot_acquire(
    p_resource text, p_activity uuid, p_key text, p_limit integer, p_holder text,
    p_priority integer, p_run_id text, p_lease integer, p_stale float8
) RETURNS TABLE (slot text, token bigint, waited float8, fresh boolean, held integer,
                 ahead integer)
LANGUAGE plpgsql AS $$
DECLARE
    v_slot  text;
    v_token bigint;
    v_held  integer;
    v_ahead integer;
    v_prio  integer;
    v_seq   bigint;
    v_since timestamptz;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended('flow-slot:' || p_resource, 0));
    INSERT INTO flow_slot_keys (resource, activity_id, key, slot_limit)
        VALUES (p_resource, p_activity, p_key, p_limit)
        ON CONFLICT (resource) DO UPDATE SET slot_limit = EXCLUDED.slot_limit
        WHERE flow_slot_keys.slot_limit <> EXCLUDED.slot_limit;

    SELECT s.slot, s.token INTO v_slot, v_token FROM permit_slots s
        WHERE s.resource = p_resource AND s.holder = p_holder AND s.ended_at IS NULL
        AND s.acquired_at + make_interval(secs => s.lease_seconds) > now();
    IF FOUND THEN  -- already this holder's: the same grant, nothing counted again
        DELETE FROM flow_waiters w WHERE w.resource = p_resource AND w.holder = p_holder;
        RETURN QUERY SELECT v_slot, v_token, 0::float8, false, NULL::integer, NULL::integer;
        RETURN;
    END IF;

    SELECT count(*) INTO v_held FROM permit_slots s
        WHERE s.resource = p_resource AND s.ended_at IS NULL
        AND s.acquired_at + make_interval(secs => s.lease_seconds) > now();
    SELECT w.priority, w.seq, w.arrived_at INTO v_prio, v_seq, v_since FROM flow_waiters w
        WHERE w.resource = p_resource AND w.holder = p_holder;
    -- Live waiters ahead: by (priority, seq); a newcomer queues after every waiter of
    -- its priority or a better one.
    SELECT count(*) INTO v_ahead FROM flow_waiters w
        WHERE w.resource = p_resource AND w.holder <> p_holder
        AND w.seen_at > now() - make_interval(secs => p_stale)
        AND CASE WHEN v_seq IS NULL THEN w.priority <= p_priority
                 ELSE (w.priority, w.seq) < (v_prio, v_seq) END;

    IF v_held + v_ahead >= p_limit THEN  -- not its turn: queue once, then keep its place
        INSERT INTO flow_waiters AS f (resource, holder, priority)
            VALUES (p_resource, p_holder, p_priority)
            ON CONFLICT (resource, holder) DO UPDATE SET seen_at = now();
        RETURN QUERY SELECT NULL::text, NULL::bigint, 0::float8, false, v_held, v_ahead;
        RETURN;
    END IF;

    -- The lowest-numbered slot below the limit that nobody holds: a row to reuse (its
    -- token rises), else a number without a row (rows are 0..n-1: a new one is n).
    SELECT s.slot INTO v_slot FROM permit_slots s
        WHERE s.resource = p_resource AND s.slot::integer < p_limit
        AND NOT (s.ended_at IS NULL
                 AND s.acquired_at + make_interval(secs => s.lease_seconds) > now())
        ORDER BY s.slot::integer LIMIT 1;
    IF v_slot IS NULL THEN
        SELECT n::text INTO v_slot FROM generate_series(0, p_limit - 1) n
            WHERE NOT EXISTS (SELECT 1 FROM permit_slots s
                              WHERE s.resource = p_resource AND s.slot = n::text)
            ORDER BY n LIMIT 1;
    END IF;
    INSERT INTO permit_slots AS s (resource, slot, token, run_id, holder, lease_seconds)
        VALUES (p_resource, v_slot, 1, p_run_id, p_holder, p_lease)
        ON CONFLICT ON CONSTRAINT permit_slots_pkey DO UPDATE SET token = s.token + 1,
        run_id = EXCLUDED.run_id, holder = EXCLUDED.holder,
        lease_seconds = EXCLUDED.lease_seconds, acquired_at = now(), ended_at = NULL,
        outcome = NULL
        RETURNING s.token INTO v_token;
    DELETE FROM flow_waiters w WHERE w.resource = p_resource AND w.holder = p_holder;
    RETURN QUERY SELECT v_slot, v_token,
        coalesce(extract(epoch FROM now() - v_since), 0)::float8, true, v_held + 1, v_ahead;
END $$;

-- Release (or give up waiting), one transaction: end the holder's slot row, leave the
-- queue, sweep silent waiters, and return the waiters whose turn it is now (the
-- releasing run signals them flow_wake). When nobody holds or waits any more, the
-- resource goes: its key row and its slot rows (so tokens restart after an idle key).
CREATE OR REPLACE FUNCTION flow_slot_release(
    p_resource text, p_holder text, p_limit integer, p_stale float8
) RETURNS SETOF text
LANGUAGE plpgsql AS $$
DECLARE
    v_held integer;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended('flow-slot:' || p_resource, 0));
    UPDATE permit_slots s SET ended_at = now(), outcome = 'released'
        WHERE s.resource = p_resource AND s.holder = p_holder AND s.ended_at IS NULL;
    DELETE FROM flow_waiters w WHERE w.resource = p_resource
        AND (w.holder = p_holder OR w.seen_at <= now() - make_interval(secs => p_stale));
    SELECT count(*) INTO v_held FROM permit_slots s
        WHERE s.resource = p_resource AND s.ended_at IS NULL
        AND s.acquired_at + make_interval(secs => s.lease_seconds) > now();
    IF v_held = 0 AND NOT EXISTS (SELECT 1 FROM flow_waiters w WHERE w.resource = p_resource)
    THEN
        DELETE FROM permit_slots s WHERE s.resource = p_resource;
        DELETE FROM flow_slot_keys k WHERE k.resource = p_resource;
        RETURN;
    END IF;
    RETURN QUERY SELECT w.holder FROM flow_waiters w WHERE w.resource = p_resource
        ORDER BY w.priority, w.seq LIMIT greatest(0, p_limit - v_held);
END $$;
