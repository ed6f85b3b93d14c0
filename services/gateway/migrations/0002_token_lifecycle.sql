-- Tokens get an opaque id (to list and revoke them without ever showing the secret), an optional expiry
-- and a revocation time. A revoked row is kept, so an id is never reused and a revocation stays visible.
ALTER TABLE api_tokens
    ADD COLUMN id text,
    ADD COLUMN expires_at timestamptz,
    ADD COLUMN revoked_at timestamptz;

UPDATE api_tokens SET id = 'tok_' || replace(gen_random_uuid()::text, '-', '') WHERE id IS NULL;

ALTER TABLE api_tokens ALTER COLUMN id SET NOT NULL;
CREATE UNIQUE INDEX api_tokens_id ON api_tokens (id);
-- The listing's order (created_at, id), per scope and overall.
CREATE INDEX api_tokens_scope_page ON api_tokens (scope, created_at, id);
CREATE INDEX api_tokens_page ON api_tokens (created_at, id);
