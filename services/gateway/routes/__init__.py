"""HTTP routes, one module per domain; each maps a route to one bus request."""
