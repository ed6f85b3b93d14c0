-- The catalog over a workspace's life (services/workspace/catalog.py): the analyst's own material first,
-- then the runs' publications, the current ones before those a later run superseded; a run's report
-- (an artifact a run pinned) is no catalog item; and a run's catalog pages "as of" its admission.

-- Which part of the catalog an association is: 0 the analyst's own (every source, and a publication or an
-- artifact no run produced), 1 a run's publication; null for what is no catalog item (conversations, runs,
-- and a run's report, whose publication is the item).
ALTER TABLE associations ADD COLUMN catalog_class smallint GENERATED ALWAYS AS (
    CASE
        WHEN kind = 'source' OR (kind IN ('publication', 'artifact') AND run_id IS NULL) THEN 0
        WHEN kind = 'publication' THEN 1
    END
) STORED;
-- A run's publication a later run superseded (cited it, or answered the same question): the mark of that
-- change, taken from the same sequence as `seq`, so "superseded as of an admission" is `superseded_seq < mark`.
ALTER TABLE associations ADD COLUMN superseded_seq bigint;
-- An owner has yet to tell what this row lacks (a title lost to the association race, whether an artifact is
-- a run's report): services/workspace/backfill.py asks, once, after the start.
ALTER TABLE associations ADD COLUMN backfill boolean NOT NULL DEFAULT false;

-- `catalog_count` counts what a run's catalog holds (publications and sources), `pinned_count` the artifacts
-- the analyst pinned (a person's catalog shows them too). `catalog_mark` is the latest `seq` or
-- `superseded_seq` of the workspace: the catalog "as of now" is everything before `catalog_mark + 1`.
ALTER TABLE workspaces ADD COLUMN pinned_count integer NOT NULL DEFAULT 0;
ALTER TABLE workspaces ADD COLUMN catalog_mark bigint NOT NULL DEFAULT 0;

-- Each part of the order is one index-ordered scan that stops at the page: the cost does not grow with the
-- number of associations.
DROP INDEX IF EXISTS associations_catalog;
CREATE INDEX associations_own ON associations (workspace_id, seq DESC) WHERE catalog_class = 0;
CREATE INDEX associations_runs_current ON associations (workspace_id, seq DESC)
    WHERE catalog_class = 1 AND superseded_seq IS NULL;
CREATE INDEX associations_runs_superseded ON associations (workspace_id, seq DESC)
    WHERE catalog_class = 1 AND superseded_seq IS NOT NULL;
-- Superseded after an admission: still current for that run (few rows, read by this index).
CREATE INDEX associations_superseded_since ON associations (workspace_id, superseded_seq)
    WHERE superseded_seq IS NOT NULL;
-- The current run publications answering one question: a later answer to it supersedes them.
CREATE INDEX associations_current_by_title ON associations (workspace_id, md5(title))
    WHERE catalog_class = 1 AND superseded_seq IS NULL;
CREATE INDEX associations_backfill ON associations (seq) WHERE backfill;

-- What earlier runs superseded, from what is known already: a run's publication whose title (the question
-- it answered) a later run's publication repeats, or that a later run's publication of the same workspace
-- cites (citations, learned from publication.committed). Each one by its first such successor.
UPDATE associations y SET superseded_seq = nxt.by
FROM (
    SELECT workspace_id, ref_id, lead(seq) OVER (PARTITION BY workspace_id, title ORDER BY seq) AS by
    FROM associations WHERE catalog_class = 1 AND title IS NOT NULL
) nxt
WHERE nxt.by IS NOT NULL AND y.workspace_id = nxt.workspace_id AND y.kind = 'publication' AND y.ref_id = nxt.ref_id;

UPDATE associations y SET superseded_seq = least(y.superseded_seq, cited.by)
FROM (
    SELECT e.workspace_id, e.ref_id, min(x.seq) AS by
    FROM associations e
    JOIN workspaces w ON w.id = e.workspace_id
    JOIN citations c ON c.scope = w.scope AND c.ref_kind = 'publication' AND c.ref_id = e.ref_id
    JOIN associations x ON x.workspace_id = e.workspace_id AND x.kind = 'publication' AND x.ref_id = c.pub_id
    WHERE e.catalog_class = 1 AND x.catalog_class = 1 AND x.seq > e.seq
    GROUP BY e.workspace_id, e.ref_id
) cited
WHERE y.workspace_id = cited.workspace_id AND y.kind = 'publication' AND y.ref_id = cited.ref_id;

-- Publications that lost their title, and artifacts that may be a run's report (earlier run hosts pinned
-- them without saying so): the owners are asked after the start.
UPDATE associations SET backfill = true
WHERE (kind = 'publication' AND title IS NULL) OR (kind = 'artifact' AND run_id IS NULL);

UPDATE workspaces w SET catalog_count = c.items, pinned_count = c.pinned, catalog_mark = c.mark
FROM (
    SELECT workspace_id,
           count(*) FILTER (WHERE catalog_class IS NOT NULL AND kind <> 'artifact') AS items,
           count(*) FILTER (WHERE catalog_class = 0 AND kind = 'artifact') AS pinned,
           greatest(max(seq), max(superseded_seq)) AS mark
    FROM associations GROUP BY workspace_id
) c
WHERE c.workspace_id = w.id;
