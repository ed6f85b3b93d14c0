-- The checked claims of a run's answer (runhost computes them when the run publishes): immutable with
-- the version they describe.
ALTER TABLE publication_versions ADD COLUMN claims jsonb NOT NULL DEFAULT '[]';
