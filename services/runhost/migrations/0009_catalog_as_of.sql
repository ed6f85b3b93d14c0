-- A run's catalog as admitted pages past its first page (kept in `catalog`): the workspace reads every later
-- page as of this mark of the admission (services/workspace/catalog.py). Runs admitted before have none, and
-- their catalog is the first page alone.
ALTER TABLE runs ADD COLUMN catalog_as_of bigint;
