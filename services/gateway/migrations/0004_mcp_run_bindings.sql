-- The runs an MCP session holds (begin_run, take_over_run), so that its run tools need no run id nor lease
-- (services/gateway/mcp/run_bindings.py). The session id is never stored: a row is found by a hash of the session
-- id and the bearer token together, and the lease is sealed with a key made from both, so neither the
-- session id alone, nor this table alone, nor another token with the same session id opens it.
CREATE TABLE mcp_run_bindings (
    session_hash text NOT NULL,
    run_id       text NOT NULL,
    token_hash   text NOT NULL REFERENCES api_tokens (token_hash),
    sealed_lease bytea NOT NULL,
    bound_at     timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz NOT NULL,
    PRIMARY KEY (session_hash, run_id)
);
CREATE INDEX mcp_run_bindings_expiry ON mcp_run_bindings (expires_at);
-- The run a tool call without a run id acts on: the session's latest binding.
CREATE INDEX mcp_run_bindings_latest ON mcp_run_bindings (session_hash, bound_at DESC);
