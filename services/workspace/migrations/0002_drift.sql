-- What each publication version cites (its `sources`), learned from the publication service's events:
-- a workspace's associated publications cite through this table without copying their bodies.
CREATE TABLE citations (
    scope       text NOT NULL,
    pub_id      text NOT NULL,
    pub_version integer NOT NULL,
    ref_kind    text NOT NULL,
    ref_id      text NOT NULL,
    ref_version integer NOT NULL,
    PRIMARY KEY (scope, ref_kind, ref_id, pub_id, pub_version, ref_version)
);

-- A ref the workspace relies on changed after it was cited: one row per (ref, new version or reason).
CREATE TABLE drifts (
    seq          bigserial PRIMARY KEY,
    workspace_id text NOT NULL REFERENCES workspaces (id),
    ref_kind     text NOT NULL,
    ref_id       text NOT NULL,
    ref_version  integer NOT NULL,
    cited_by     jsonb NOT NULL,
    new_version  integer,
    reason       text NOT NULL CHECK (reason IN ('new_version', 'withdrawn', 'retired')),
    detected_at  timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX drifts_once ON drifts (workspace_id, ref_kind, ref_id, ref_version, reason, coalesce(new_version, 0));

-- A drift adds its open question itself: that revision is the system's, neither the model's nor a person's.
ALTER TABLE checkpoint_revisions DROP CONSTRAINT checkpoint_revisions_author_check;
ALTER TABLE checkpoint_revisions ADD CONSTRAINT checkpoint_revisions_author_check
    CHECK (author IN ('model', 'user', 'system'));
