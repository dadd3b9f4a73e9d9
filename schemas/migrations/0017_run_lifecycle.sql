-- Runs that end without running to their end (issue 39, docs/flow-control.md):
-- cancelled by a cancel_on event, timed out by flow.timeouts, held while their activity
-- is paused and skipped on resume. The statuses are schemas/status.py's RunStatus
-- (tests/integration/schemas/test_status_checks.py compares the two).
ALTER TABLE activity_runs DROP CONSTRAINT IF EXISTS activity_runs_status_check;
ALTER TABLE activity_runs ADD CONSTRAINT activity_runs_status_check
    CHECK (status IN ('running', 'succeeded', 'failed', 'held', 'cancelled', 'timed_out',
                      'skipped'));

-- Why a run ended as it did, when not by its tasks: 'cancel_on:<event_id>' (the
-- cancelling event), 'timeout:start' / 'timeout:finish', 'held:skipped' (the operator
-- who skipped it is in the audit). NULL for a run that ran to its end.
ALTER TABLE activity_runs ADD COLUMN IF NOT EXISTS ended_by text;

-- A paused activity (ingest activities pause): its new runs are recorded 'held' and
-- start no task until it is resumed. NULL: not paused.
ALTER TABLE activities ADD COLUMN IF NOT EXISTS paused_at timestamptz;
ALTER TABLE activities ADD COLUMN IF NOT EXISTS paused_by text;
