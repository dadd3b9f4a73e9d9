-- How many of a run's tasks have succeeded, counted in the statement that marks each one
-- succeeded (workers/store.py, _advance). The step that marks a run's last task
-- succeeded, when it knows the plan's size, marks the run succeeded in the same
-- statement, and RunActivityWorkflow then has no finish step of its own: the run's
-- outcome commits with its last task's. Rows from before this column count from 0
-- and never reach their plan's size, so their runs are finished by the workflow's step.
ALTER TABLE activity_runs ADD COLUMN IF NOT EXISTS tasks_succeeded integer NOT NULL DEFAULT 0;
