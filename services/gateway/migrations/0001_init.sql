-- Only the sha256 of a token is stored; the token itself is shown once, when it is issued.
CREATE TABLE api_tokens (
    token_hash text PRIMARY KEY,
    scope      text NOT NULL,
    principal  text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
