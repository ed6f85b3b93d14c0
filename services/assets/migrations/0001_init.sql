-- A logical source: a name chosen by a person or a tool, unique within a scope and namespace.
-- namespace '' is the scope's own catalog; 'run:<run_id>' holds one run's attachments (run-local).
CREATE TABLE sources (
    pk             bigserial PRIMARY KEY,
    scope          text NOT NULL,
    namespace      text NOT NULL DEFAULT '',
    source_id      text NOT NULL,
    status         text NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'retired')),
    latest_version integer NOT NULL DEFAULT 0,
    created_at     timestamptz NOT NULL DEFAULT now(),
    retired_at     timestamptz,
    UNIQUE (scope, namespace, source_id)
);

-- One row per version. identity_key = sha256(scope | root | source_id | content_hash) is unique, which is
-- what makes identical bytes under the same source one version, however many uploads race.
CREATE TABLE asset_versions (
    id            text PRIMARY KEY,
    source_pk     bigint NOT NULL REFERENCES sources (pk),
    version       integer NOT NULL CHECK (version >= 1),
    identity_key  text NOT NULL UNIQUE,
    root          text NOT NULL,
    content_hash  text NOT NULL,
    size          bigint NOT NULL,
    kind          text NOT NULL CHECK (kind IN ('pdf', 'docx', 'xlsx', 'html', 'text')),
    filename      text,
    blob_bucket   text NOT NULL,
    blob_key      text NOT NULL,
    status        text NOT NULL DEFAULT 'registered'
                  CHECK (status IN ('registered', 'extracting', 'active', 'superseded', 'failed', 'retired')),
    extraction    jsonb,
    error         text,
    attempts      integer NOT NULL DEFAULT 0,
    run_id        text,
    promoted_from text REFERENCES asset_versions (id),
    created_at    timestamptz NOT NULL DEFAULT now(),
    settled_at    timestamptz,
    UNIQUE (source_pk, version)
);
-- At most one active version per source, whatever happens concurrently.
CREATE UNIQUE INDEX asset_versions_one_active ON asset_versions (source_pk) WHERE status = 'active';
CREATE INDEX asset_versions_unfinished ON asset_versions (created_at) WHERE status IN ('registered', 'extracting');

-- Passages with their locators. Rows of a version are written in the transaction that activates it.
CREATE TABLE evidence (
    id        text PRIMARY KEY,
    asset_id  text NOT NULL REFERENCES asset_versions (id),
    scope     text NOT NULL,
    ord       integer NOT NULL,
    locator   text NOT NULL,
    text      text NOT NULL,
    text_hash text NOT NULL,
    tsv       tsvector GENERATED ALWAYS AS (to_tsvector('english', text)) STORED
);
CREATE INDEX evidence_tsv ON evidence USING gin (tsv);
CREATE INDEX evidence_asset ON evidence (asset_id, ord);

-- What a run's own search returned: a run may read those passages besides the refs of its grant.
CREATE TABLE run_evidence_hits (
    run_id      text NOT NULL,
    evidence_id text NOT NULL REFERENCES evidence (id),
    scope       text NOT NULL,
    found_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, evidence_id)
);
