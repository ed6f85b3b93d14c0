"""Who sent an MCP request: put in the ASGI scope by the endpoint (endpoint.py), read by the tools'
server (server.py)."""

from __future__ import annotations

from dataclasses import dataclass

from services.gateway.deps import ActorBus
from services.gateway.mcp.run_bindings import McpSession, RunBindings
from shared.contracts.common import Actor

# The ASGI scope key the caller travels under.
CALLER = "dossier.mcp.caller"


@dataclass(frozen=True)
class Caller:
    """Who sent this HTTP request (the bus as that caller), the id its log lines carry, and the MCP session
    it belongs to (None: the client keeps none), whose runs `bindings` holds."""

    bus: ActorBus
    request_id: str
    bindings: RunBindings
    session: McpSession | None = None

    @property
    def actor(self) -> Actor:
        return self.bus.actor
