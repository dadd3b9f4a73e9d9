-- Pause-and-fix audit: every operator action on a task that paused as pending_fix
-- (workers/fixes.py). One row per accepted Workflow Update; (task_id, seq) makes
-- the insert safe to repeat when the local activity retries.
CREATE TABLE IF NOT EXISTS task_fixes (
    task_id    text NOT NULL,              -- task-{run_id}:{task_type}:{index}
    seq        integer NOT NULL,           -- 1, 2, ... per task
    run_id     uuid NOT NULL,
    task_type  text NOT NULL,
    action     text NOT NULL CHECK (action IN ('fix', 'skip', 'abort')),
    patch      jsonb,                      -- the JSON merge patch (fix only)
    error      text NOT NULL,              -- the error this action answered
    actor      text NOT NULL,
    note       text,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (task_id, seq)
);
CREATE INDEX IF NOT EXISTS task_fixes_run ON task_fixes (run_id);
-- The ops service lists and counts paused tasks by status.
CREATE INDEX IF NOT EXISTS task_instances_status ON task_instances (status)
    WHERE status = 'pending_fix';
