-- What changed under a claim since it was checked (a cited version got a successor, was withdrawn or
-- retired), as the workspace's re-check reported it. Kept beside the immutable `claims` list, one row a
-- claim: the change it shows now.
CREATE TABLE claim_stale (
    publication_id text NOT NULL,
    version        integer NOT NULL,
    claim_index    integer NOT NULL CHECK (claim_index >= 0),
    stale          jsonb NOT NULL,
    marked_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (publication_id, version, claim_index),
    FOREIGN KEY (publication_id, version) REFERENCES publication_versions (publication_id, version)
);
