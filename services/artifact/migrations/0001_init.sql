-- Retained files. The bytes live in object storage under their content key (sha256/ab/abcd…);
-- this table holds the reference, the scope and the retention. Two uploads of the same bytes share a key.
CREATE TABLE artifacts (
    id           text PRIMARY KEY,
    scope        text NOT NULL,
    title        text NOT NULL,
    media_type   text NOT NULL,
    size         bigint NOT NULL CHECK (size >= 1),
    content_hash text NOT NULL,
    bucket       text NOT NULL,
    object_key   text NOT NULL,
    -- NULL: kept with no expiry. A retention may lift an expiry or push it later, never earlier.
    expires_at   timestamptz,
    retained_at  timestamptz,
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX artifacts_scope ON artifacts (scope, created_at DESC);
