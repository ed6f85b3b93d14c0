"""`dossier mcp`: the configuration an MCP client (Claude Desktop, an IDE, another agent) needs for Dossier."""

from __future__ import annotations

import argparse
from typing import Any

from dossier_cli.client import Client, CliError, print_json


def client_config(url: str, token: str, *, name: str = "dossier") -> dict[str, Any]:
    """The `mcpServers` entry of a client's configuration: streamable HTTP at `<url>/mcp`, with the token."""
    if not token:
        raise CliError("DOSSIER_TOKEN is not set (ask an admin for a token: POST /v1/admin/tokens)")
    return {
        "mcpServers": {
            name: {
                "type": "http",
                "url": f"{url.rstrip('/')}/mcp",
                "headers": {"Authorization": f"Bearer {token}"},
            }
        }
    }


def print_client_config(url: str, token: str, *, name: str = "dossier") -> None:
    print_json(client_config(url, token, name=name))


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("mcp", help="print the configuration an MCP client needs to reach Dossier")
    parser.add_argument("--name", default="dossier", help="the server's name in the client's mcpServers")
    parser.set_defaults(func=_mcp)


def _mcp(client: Client, args: argparse.Namespace) -> int:
    print_client_config(client.url, client.token, name=args.name)
    return 0
