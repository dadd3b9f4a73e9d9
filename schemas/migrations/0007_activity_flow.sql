-- An activity's flow block (schemas/flow.py): how its runs are paced. NULL: no pacing.
ALTER TABLE activities ADD COLUMN IF NOT EXISTS flow jsonb;
