-- A run's catalog as admitted pages past its first page (kept in `catalog`): the workspace reads every later
-- page as of this mark of the admission (services/workspace/catalog.py). Runs admitted before have none, and
-- their catalog is the first page alone.
ALTER TABLE runs ADD COLUMN catalog_as_of bigint;
-- The run's HTML report, once retained: a run's report is no catalog item any more, so the run names it.
ALTER TABLE runs ADD COLUMN report_artifact_id text;
