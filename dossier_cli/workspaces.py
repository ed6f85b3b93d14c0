"""`dossier workspace create|list|show|goal` and `dossier checkpoint WORKSPACE`."""

from __future__ import annotations

import argparse
from typing import Any

from dossier_cli.client import Client, print_json


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("workspace", help="workspaces: a goal that outlives every run")
    actions = parser.add_subparsers(dest="action", required=True)

    create = actions.add_parser("create", help="create a workspace with its first goal")
    create.add_argument("--title", required=True)
    create.add_argument("--goal", required=True)
    create.set_defaults(func=_create)

    listing = actions.add_parser("list", help="the workspaces of your scope")
    listing.add_argument("--json", action="store_true", help="print the API's JSON")
    listing.set_defaults(func=_list)

    show = actions.add_parser("show", help="one workspace")
    show.add_argument("id")
    show.set_defaults(func=_show)

    goal = actions.add_parser("goal", help="the goal's versions, or a new goal with TEXT")
    goal.add_argument("id")
    goal.add_argument("text", nargs="?")
    goal.add_argument(
        "--expected-version",
        type=int,
        help="the version you are replacing (default: the current one; a concurrent change still conflicts)",
    )
    goal.set_defaults(func=_goal)

    checkpoint = sub.add_parser("checkpoint", help="a workspace's research progress (advisory)")
    checkpoint.add_argument("workspace")
    checkpoint.add_argument("--revisions", action="store_true", help="every revision, oldest first")
    checkpoint.add_argument("--json", action="store_true", help="print the API's JSON")
    checkpoint.set_defaults(func=_checkpoint)


def _create(client: Client, args: argparse.Namespace) -> int:
    print_json(client.request("POST", "/v1/workspaces", json={"title": args.title, "goal": args.goal}))
    return 0


def _list(client: Client, args: argparse.Namespace) -> int:
    items = client.request("GET", "/v1/workspaces")["items"]
    if args.json:
        print_json({"items": items})
        return 0
    for ws in items:
        print(f"{ws['id']}  {ws['status']:<8}  goal v{ws['goal']['version']:<3}  {ws['title']}")
    return 0


def _show(client: Client, args: argparse.Namespace) -> int:
    print_json(client.request("GET", f"/v1/workspaces/{args.id}"))
    return 0


def _goal(client: Client, args: argparse.Namespace) -> int:
    if args.text is None:
        print_json(client.request("GET", f"/v1/workspaces/{args.id}/goal/versions"))
        return 0
    expected = args.expected_version
    if expected is None:
        expected = client.request("GET", f"/v1/workspaces/{args.id}")["goal"]["version"]
    body = {"text": args.text, "expected_version": expected}
    print_json(client.request("PUT", f"/v1/workspaces/{args.id}/goal", json=body))
    return 0


def _checkpoint(client: Client, args: argparse.Namespace) -> int:
    path = f"/v1/workspaces/{args.workspace}/checkpoint" + ("/revisions" if args.revisions else "")
    data = client.request("GET", path)
    if args.json:
        print_json(data)
        return 0
    for checkpoint in data["items"] if args.revisions else [data]:
        _print_checkpoint(checkpoint)
    return 0


def _print_checkpoint(cp: dict[str, Any]) -> None:
    print(f"revision {cp['revision']} ({cp['status']}, advisory, by {cp['author']}, {cp['created_at']})")
    if cp["status"] == "unavailable":
        print("summary withheld: a source it was derived from is no longer available")
        for missing in cp["unavailable_sources"]:
            ref = missing["ref"]
            print(f"  - {ref['kind']} {ref['id']}@{ref['version']}: {missing['reason']}")
    elif cp["summary"] is not None:
        print(cp["summary"])
    derived = cp["derived_from"]
    if derived["run_id"] or derived["publication"]:
        pub = derived["publication"]
        pub_text = f"{pub['id']}@{pub['version']}" if pub else "-"
        print(f"derived from run {derived['run_id'] or '-'}, publication {pub_text}")
    for q in cp["open_questions"]:
        mark = "x" if q["status"] == "resolved" else " "
        print(f"  [{mark}] {q['id']}  {q['text']}")
