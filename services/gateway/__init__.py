"""Gateway: the HTTP API. It owns API tokens and maps HTTP to bus requests; it decides no domain rule."""
