CREATE TABLE publications (
    id             text PRIMARY KEY,
    scope          text NOT NULL,
    title          text NOT NULL,
    latest_version integer NOT NULL,
    workspace_id   text,
    request_key    text,
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX publications_scope ON publications (scope, created_at DESC);
CREATE UNIQUE INDEX publications_request_key ON publications (scope, request_key)
    WHERE request_key IS NOT NULL;

-- Versions are immutable: only `status` and the withdrawal columns ever change.
CREATE TABLE publication_versions (
    publication_id   text NOT NULL REFERENCES publications (id),
    version          integer NOT NULL CHECK (version >= 1),
    title            text NOT NULL,
    body             text NOT NULL,
    content_hash     text NOT NULL,
    sources          jsonb NOT NULL DEFAULT '[]',
    run_id           text,
    status           text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'withdrawn')),
    withdrawn_reason text,
    withdrawn_at     timestamptz,
    created_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (publication_id, version)
);
