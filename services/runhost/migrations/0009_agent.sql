-- The outside agent that drives an external run ({name, model}), as its admission named it: the run's PROV
-- names it (runs admitted before this migration, and runs the run host drives, have none).
ALTER TABLE runs ADD COLUMN agent jsonb;
