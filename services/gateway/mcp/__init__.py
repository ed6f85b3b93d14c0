"""The gateway's MCP face at `/mcp`: the endpoint (the API's bearer auth in front of the SDK's transport),
the server and its tools (the same bus calls as the HTTP API), and the runs an MCP session holds."""
