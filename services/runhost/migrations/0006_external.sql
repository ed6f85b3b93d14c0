-- Runs driven by an outside agent: the run host's workers never claim them; the agent holds the lease
-- (the same owner/epoch/expiry columns fence its writes) through a secret token, kept here only as its
-- SHA-256, one per epoch, so an older epoch's token is known as older (409), not unknown (403).
ALTER TABLE runs
    ADD COLUMN driver        text NOT NULL DEFAULT 'dossier' CHECK (driver IN ('dossier', 'external')),
    ADD COLUMN lease_seconds integer,
    ADD COLUMN final_title   text;

CREATE TABLE run_leases (
    run_id      text NOT NULL REFERENCES runs (id),
    epoch       integer NOT NULL,
    token_hash  text NOT NULL UNIQUE,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, epoch)
);

CREATE INDEX runs_external_running ON runs (lease_expires_at) WHERE driver = 'external' AND status = 'running';
