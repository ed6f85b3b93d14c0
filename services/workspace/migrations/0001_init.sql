-- A deleted workspace stays as a tombstone row (status 'deleted', nothing else kept), so its id is never
-- reused or brought back; everything hanging off it is removed when it is deleted.
CREATE TABLE workspaces (
    id                  text PRIMARY KEY,
    scope               text NOT NULL,
    title               text NOT NULL,
    status              text NOT NULL CHECK (status IN ('active', 'archived', 'deleted')),
    goal_version        integer NOT NULL DEFAULT 1,
    checkpoint_revision integer NOT NULL DEFAULT 0,
    -- Catalog-kind associations, kept with each insert so `omitted` is exact without counting rows.
    catalog_count       integer NOT NULL DEFAULT 0,
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now(),
    archived_at         timestamptz,
    deleted_at          timestamptz
);
CREATE INDEX workspaces_by_scope ON workspaces (scope, created_at DESC) WHERE status <> 'deleted';

CREATE TABLE goal_versions (
    workspace_id text NOT NULL REFERENCES workspaces (id),
    version      integer NOT NULL CHECK (version >= 1),
    text         text NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (workspace_id, version)
);

-- References to records other services own; never copies of them.
CREATE TABLE associations (
    seq          bigserial NOT NULL,
    workspace_id text NOT NULL REFERENCES workspaces (id),
    kind         text NOT NULL CHECK (kind IN ('conversation', 'run', 'source', 'artifact', 'publication')),
    ref_id       text NOT NULL,
    version      integer,
    run_id       text,
    title        text,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (workspace_id, kind, ref_id)
);
-- The catalog reads the newest N of one workspace through this index and stops: its cost does not
-- grow with the number of associations.
CREATE INDEX associations_catalog ON associations (workspace_id, seq DESC)
    WHERE kind IN ('publication', 'source', 'artifact');

-- Runs admitted into a workspace: after an archive, only these may still associate their outputs.
CREATE TABLE admissions (
    workspace_id text NOT NULL REFERENCES workspaces (id),
    run_id       text NOT NULL,
    admitted_at  timestamptz NOT NULL,
    PRIMARY KEY (workspace_id, run_id)
);

CREATE TABLE checkpoint_revisions (
    workspace_id text NOT NULL REFERENCES workspaces (id),
    revision     integer NOT NULL CHECK (revision >= 1),
    summary      text,
    questions    jsonb NOT NULL,
    derived_from jsonb NOT NULL,
    author       text NOT NULL CHECK (author IN ('model', 'user')),
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (workspace_id, revision)
);
