-- Runs held while their activity is paused (ingest activities pause, workers/hold.py):
-- `resume` lists an activity's held runs in the order they were recorded, and the
-- worker's gauges count them every few seconds. A partial index keeps both to the held
-- rows (a handful, or none) however large activity_runs grows.
CREATE INDEX IF NOT EXISTS activity_runs_held ON activity_runs (activity_id, started_at)
    WHERE status = 'held';

-- Why the activity is paused (ingest activities pause --reason); NULL when not paused.
ALTER TABLE activities ADD COLUMN IF NOT EXISTS paused_reason text;

-- The audit of pauses and resumes: who, when, why, and what a resume did with the runs
-- held meanwhile (resumed, or skipped: those rows say ended_by = 'held:skipped').
CREATE TABLE IF NOT EXISTS activity_pauses (
    id          bigserial PRIMARY KEY,
    activity_id uuid NOT NULL,
    action      text NOT NULL CHECK (action IN ('pause', 'resume')),
    actor       text NOT NULL,
    reason      text,
    held        integer NOT NULL DEFAULT 0,  -- resume: runs held when it ran
    skipped     integer NOT NULL DEFAULT 0,  -- resume --skip-held: of those, skipped
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS activity_pauses_activity ON activity_pauses (activity_id, id);
