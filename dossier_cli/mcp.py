"""`dossier mcp`: the configuration an MCP client (Claude Desktop, an IDE, another agent) needs for Dossier."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from dossier_cli.client import client
from dossier_cli.commands import command
from dossier_cli.output import print_json


def client_config(url: str, token: str, *, name: str = "dossier") -> dict[str, Any]:
    """The `mcpServers` entry of a client's configuration: streamable HTTP at `<url>/mcp`, with the token."""
    return {
        "mcpServers": {
            name: {
                "type": "http",
                "url": f"{url.rstrip('/')}/mcp",
                "headers": {"Authorization": f"Bearer {token}"},
            }
        }
    }


def register(app: typer.Typer) -> None:
    command(app, "mcp")(mcp)


def mcp(
    name: Annotated[str, typer.Option(help="The server's name in the client's mcpServers.")] = "dossier",
) -> None:
    """Print the configuration an MCP client needs to reach Dossier (JSON, with the URL and token in use)."""
    with client() as api:
        print_json(client_config(api.url, api.token, name=name))
