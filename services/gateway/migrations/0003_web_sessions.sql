-- A workbench session. Its cookie holds a random id, never the API token (only the id's sha256 is kept
-- here); the session names the token it was opened with, so that token's expiry and revocation end it
-- too, and signing out deletes the row, so a copied cookie opens nothing afterwards.
CREATE TABLE web_sessions (
    session_hash text PRIMARY KEY,
    token_hash   text NOT NULL REFERENCES api_tokens (token_hash),
    expires_at   timestamptz NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX web_sessions_expiry ON web_sessions (expires_at);
