-- Once a run has ended its model-call journal is trimmed to what a resume needs (`journal_trimmed_at`);
-- past DOSSIER_RUN_RETENTION_DAYS its working files and journal are let go (`files_released_at`), while
-- the run, its ledger and its claims stay.
ALTER TABLE runs
    ADD COLUMN journal_trimmed_at timestamptz,
    ADD COLUMN files_released_at  timestamptz;
CREATE INDEX runs_untrimmed ON runs (finished_at) WHERE finished_at IS NOT NULL AND journal_trimmed_at IS NULL;
CREATE INDEX runs_files_kept ON runs (finished_at) WHERE finished_at IS NOT NULL AND files_released_at IS NULL;
