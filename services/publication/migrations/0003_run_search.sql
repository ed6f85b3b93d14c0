-- A run's search over the publications of its own workspace (services/publication/service.py `search`).
-- Each version's words are indexed once; a long body is indexed by its first 100,000 characters.
ALTER TABLE publication_versions ADD COLUMN search tsvector
    GENERATED ALWAYS AS (to_tsvector('english'::regconfig, title || ' ' || left(body, 100000))) STORED;
CREATE INDEX publication_versions_search ON publication_versions USING gin (search);
CREATE INDEX publications_workspace ON publications (scope, workspace_id) WHERE workspace_id IS NOT NULL;

-- What a run's own search found, it may read (as the assets service does for evidence).
CREATE TABLE run_found (
    run_id         text NOT NULL,
    scope          text NOT NULL,
    publication_id text NOT NULL,
    version        integer NOT NULL,
    found_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, publication_id, version)
);
