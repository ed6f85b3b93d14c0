"""Entry point of `dossier`. Each domain module registers its subcommands; errors exit non-zero."""

from __future__ import annotations

import argparse
import sys

from dossier_cli import assets, mcp, publications, runs, workspaces
from dossier_cli.client import Client, CliError

# Each module has `register(subparsers)`; its handlers are `func(client, args) -> exit code`.
DOMAINS = (publications, workspaces, assets, runs, mcp)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dossier", description="Dossier: long-running research goals.")
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="start the local stack in the foreground (same as `make up`)")
    up.set_defaults(func=None)
    for module in DOMAINS:
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "up":
        from shared.stack import main as stack_main

        return stack_main()
    client = Client()
    try:
        return int(args.func(client, args) or 0)
    except CliError as exc:
        print(f"dossier: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    finally:
        client.close()


if __name__ == "__main__":
    raise SystemExit(main())
