CREATE TABLE conversations (
    id           text PRIMARY KEY,
    scope        text NOT NULL,
    workspace_id text NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now()
);

-- A run freezes what it was admitted with: goal version and text, the bounded catalog, the history
-- selection and its limits. The lease (owner, epoch, expiry) fences every write of a worker.
CREATE TABLE runs (
    id                    text PRIMARY KEY,
    scope                 text NOT NULL,
    workspace_id          text NOT NULL,
    conversation_id       text NOT NULL REFERENCES conversations (id),
    request_id            text NOT NULL,
    params_hash           text NOT NULL,
    status                text NOT NULL CHECK (status IN ('admitted', 'running', 'completed', 'failed', 'cancelled')),
    question              text NOT NULL,
    model                 text NOT NULL,
    goal_version          integer NOT NULL,
    goal_text             text NOT NULL,
    catalog               jsonb NOT NULL,
    history               jsonb NOT NULL DEFAULT '[]',
    limits                jsonb NOT NULL,
    publication_id        text,
    publication_version   integer,
    checkpoint_proposal   jsonb NOT NULL DEFAULT '{"status": "none", "revision": null}',
    workspace_association text NOT NULL DEFAULT 'pending',
    error                 text,
    cancel_requested      boolean NOT NULL DEFAULT false,
    lease_owner           text,
    lease_epoch           integer NOT NULL DEFAULT 0,
    lease_expires_at      timestamptz,
    steps                 integer NOT NULL DEFAULT 0,
    chars_read            bigint NOT NULL DEFAULT 0,
    model_requests        integer NOT NULL DEFAULT 0,
    created_at            timestamptz NOT NULL DEFAULT now(),
    started_at            timestamptz,
    finished_at           timestamptz,
    UNIQUE (scope, request_id)
);
CREATE INDEX runs_claimable ON runs (created_at) WHERE status IN ('admitted', 'running');
CREATE INDEX runs_workspace ON runs (scope, workspace_id, created_at DESC);
CREATE INDEX runs_conversation ON runs (conversation_id, created_at);

CREATE TABLE ledger (
    id            bigserial PRIMARY KEY,
    run_id        text NOT NULL REFERENCES runs (id),
    stage         text NOT NULL CHECK (stage IN ('listed', 'read', 'included', 'unavailable')),
    ref           jsonb NOT NULL,
    content_hash  text,
    locator       text,
    reason        text,
    model_request text,
    epoch         integer NOT NULL,
    at            timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX ledger_run ON ledger (run_id, id);

-- The index of a run's working files; the bytes are in object storage under runs/<run_id>/.
CREATE TABLE run_files (
    run_id     text NOT NULL REFERENCES runs (id),
    path       text NOT NULL,
    size       integer NOT NULL,
    sha256     text NOT NULL,
    -- For sources/*.txt: the material it is a lossless copy of, so a resumed run can cite it.
    ref          jsonb,
    content_hash text,
    locator      text,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, path)
);
