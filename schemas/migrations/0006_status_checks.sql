-- Run and task statuses are the values of schemas/status.py (RunStatus, TaskStatus);
-- tests/integration/schemas/test_status_checks.py checks that these lists match them.
ALTER TABLE activity_runs ADD CONSTRAINT activity_runs_status_check
    CHECK (status IN ('running', 'succeeded', 'failed'));
ALTER TABLE task_instances ADD CONSTRAINT task_instances_status_check
    CHECK (status IN ('pending', 'running', 'pending_fix', 'succeeded', 'failed', 'skipped',
                      'duplicate'));
