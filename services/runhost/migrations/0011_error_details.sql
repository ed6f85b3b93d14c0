-- What goes with a run's `error` when it is a code: for `limit_reached`, which limit (`{limit, value}`).
ALTER TABLE runs ADD COLUMN IF NOT EXISTS error_details jsonb;
