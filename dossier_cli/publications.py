"""`dossier publication create|show`."""

from __future__ import annotations

import argparse
from pathlib import Path

from dossier_cli.client import Client, print_json


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("publication", help="publications and their exact versions")
    actions = parser.add_subparsers(dest="action", required=True)

    create = actions.add_parser("create", help="publish a body as version 1")
    create.add_argument("--title", required=True)
    create.add_argument("--body-file", type=Path, required=True)
    create.add_argument("--workspace", dest="workspace_id")
    create.set_defaults(func=_create)

    show = actions.add_parser("show", help="a publication, or one exact version of it")
    show.add_argument("id")
    show.add_argument("--version", type=int)
    show.set_defaults(func=_show)


def _create(client: Client, args: argparse.Namespace) -> int:
    body = {"title": args.title, "body": args.body_file.read_text(encoding="utf-8")}
    if args.workspace_id:
        body["workspace_id"] = args.workspace_id
    print_json(client.request("POST", "/v1/publications", json=body))
    return 0


def _show(client: Client, args: argparse.Namespace) -> int:
    path = f"/v1/publications/{args.id}" + (f"/versions/{args.version}" if args.version else "")
    print_json(client.request("GET", path))
    return 0
