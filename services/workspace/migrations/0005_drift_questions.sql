-- The open question a drift added to the checkpoint: a later run that reads the new version resolves it.
ALTER TABLE drifts ADD COLUMN question_id text;
CREATE INDEX drifts_questions ON drifts (workspace_id) WHERE question_id IS NOT NULL AND reason = 'new_version';
-- The citing version's title, as its event announced it: a drift's question names it by its title even
-- when the workspace's association holds none.
ALTER TABLE citations ADD COLUMN pub_title text;
CREATE INDEX citations_titles ON citations (scope, pub_id, pub_version DESC) WHERE pub_title IS NOT NULL;
