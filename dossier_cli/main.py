"""Entry point of `dossier`: the root command, its global options and exit codes, and one Typer app per domain."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Annotated

import typer

from dossier_cli import admin, artifacts, assets, external, logs, mcp, publications, runs, workspaces
from dossier_cli.client import EXIT_API, EXIT_INTERRUPTED
from dossier_cli.commands import command, fail, remember

HELP = """\
Dossier: research goals that outlive every run. A client of the gateway's HTTP API.

It connects to --url (else DOSSIER_URL, else http://127.0.0.1:8080) with --token (else DOSSIER_TOKEN).
Admin commands use --token, else DOSSIER_ADMIN_TOKEN, else $DOSSIER_HOME/admin-token (default ./.dossier).
Every command takes --json: the API's JSON on stdout and nothing else there; progress and messages go to
stderr. List commands follow next_cursor until the last page.

Exit codes: 0 done; 1 the API answered with an error (its message is printed) or a run did not complete;
2 usage error (bad arguments, an unreadable local file, no token, a malformed URL); 3 the gateway cannot
be reached; 130 interrupted (Ctrl-C).
"""

app = typer.Typer(
    name="dossier",
    help=HELP,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)
for module in (workspaces, runs, external, publications, assets, artifacts, admin, mcp, logs):
    module.register(app)


def _version() -> str:
    try:
        return version("dossier")
    except PackageNotFoundError:
        return "unknown"


def _print_version(value: bool) -> None:
    if value:
        print(f"dossier {_version()}")
        raise typer.Exit()


@app.callback(invoke_without_command=True)
def root(
    ctx: typer.Context,
    url: Annotated[
        str | None, typer.Option("--url", metavar="URL", help="The gateway's URL (over DOSSIER_URL).")
    ] = None,
    token: Annotated[
        str | None, typer.Option("--token", metavar="TOKEN", help="Bearer token (over DOSSIER_TOKEN).")
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the API's JSON on stdout, nothing else.")] = False,
    show_version: Annotated[
        bool, typer.Option("--version", help="Print the version and exit.", is_eager=True, callback=_print_version)
    ] = False,
) -> None:
    remember(url=url, token=token, json_out=json_out)
    if ctx.invoked_subcommand is None:
        print(ctx.get_help())
        raise typer.Exit()


@command(app, "up")
def up() -> None:
    """Start the local stack in the foreground (the same as `make up`)."""
    from devstack.stack import main as stack_main

    raise typer.Exit(stack_main())


def main(argv: list[str] | None = None) -> int:
    try:
        app(args=argv, prog_name="dossier", standalone_mode=True)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except KeyboardInterrupt:
        fail("interrupted")
        return EXIT_INTERRUPTED
    except Exception as exc:
        # Commands guard themselves (commands.guarded); this covers parsing and the root callback.
        fail(f"unexpected failure: {type(exc).__name__}: {exc}")
        return EXIT_API
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
