-- What one token may hold at once is bounded (services/gateway/sessions.py, services/gateway/mcp/run_bindings.py):
-- opening a workbench session or binding a run ends the token's oldest beyond the bound, found by these.
CREATE INDEX web_sessions_token ON web_sessions (token_hash, created_at);
CREATE INDEX mcp_run_bindings_token ON mcp_run_bindings (token_hash, expires_at);
