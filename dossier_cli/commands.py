"""How every command is declared: the common options (--url, --token, --json), and errors as one line.

`command(app)` adds the common options to a function's signature, records their values for the client, and
turns whatever the command raises into a message on stderr and an exit code: never a traceback.
"""

from __future__ import annotations

import functools
import inspect
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from typer.core import TyperGroup

from dossier_cli.client import EXIT_API, EXIT_INTERRUPTED, EXIT_USAGE, OPTIONS, CliError, UsageProblem, option
from dossier_cli.output import print_json

F = TypeVar("F", bound=Callable[..., Any])

_COMMON = {
    "url": (
        Annotated[str | None, typer.Option("--url", metavar="URL", help="The gateway's URL (over DOSSIER_URL).")],
        None,
    ),
    "token": (
        Annotated[
            str | None,
            typer.Option(
                "--token",
                metavar="TOKEN",
                help="Bearer token (over DOSSIER_TOKEN; for admin commands DOSSIER_ADMIN_TOKEN).",
            ),
        ],
        None,
    ),
    "json_out": (
        Annotated[bool, typer.Option("--json", help="Print the API's JSON on stdout and nothing else.")],
        False,
    ),
}


def fail(message: str) -> None:
    print(f"dossier: {message}", file=sys.stderr, flush=True)


def remember(*, url: str | None, token: str | None, json_out: bool) -> None:
    # Given on the root or on the command: the command's own value wins.
    for name, value in (("url", url), ("token", token), ("json", json_out)):
        if value:
            OPTIONS[name] = value


def command(app: typer.Typer, name: str | None = None, **settings: Any) -> Callable[[F], F]:
    def decorate(fn: F) -> F:
        signature = inspect.signature(fn, eval_str=True)

        @functools.wraps(fn)
        def wrapper(
            *args: Any, url: str | None = None, token: str | None = None, json_out: bool = False, **kw: Any
        ) -> Any:
            remember(url=url, token=token, json_out=json_out)
            return guarded(fn, *args, **kw)

        extra = [
            inspect.Parameter(key, inspect.Parameter.KEYWORD_ONLY, annotation=annotation, default=default)
            for key, (annotation, default) in _COMMON.items()
        ]
        params = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in signature.parameters.values()]
        wrapper.__signature__ = signature.replace(parameters=[*params, *extra])  # type: ignore[attr-defined]
        wrapper.__annotations__ = {
            **{p.name: p.annotation for p in params},
            **{k: a for k, (a, _) in _COMMON.items()},
        }
        app.command(name, **settings)(wrapper)
        return fn

    return decorate


def guarded(fn: Callable[..., Any], *args: Any, **kw: Any) -> Any:
    try:
        return fn(*args, **kw)
    except typer.Exit:
        raise
    except CliError as exc:
        if exc.envelope is not None and option("json"):
            print_json(exc.envelope)
        fail(str(exc))
        raise typer.Exit(exc.exit_code) from None
    except UnicodeEncodeError:
        # The shell passed bytes that are not UTF-8 (they arrive as surrogates): no request can carry them.
        fail("an argument or a file name is not valid UTF-8 text")
        raise typer.Exit(EXIT_USAGE) from None
    except KeyboardInterrupt:
        fail("interrupted")
        raise typer.Exit(EXIT_INTERRUPTED) from None
    except BrokenPipeError:
        # The reader left (`| head`): stop quietly, and keep the interpreter's final flush from failing too.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise typer.Exit(0) from None
    except Exception as exc:
        # The last guard of "no traceback": a reply of an unexpected shape, say, is reported as one line.
        fail(f"unexpected failure: {type(exc).__name__}: {exc}")
        raise typer.Exit(EXIT_API) from None


def default_group(default: str) -> type[TyperGroup]:
    """A group whose first argument, when it names no subcommand, goes to `default` (`dossier run WS "q"`)."""

    class DefaultGroup(TyperGroup):
        def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
            if args and args[0] not in self.commands and args[0] not in ("-h", "--help"):
                args = [default, *args]
            return super().parse_args(ctx, args)

    return DefaultGroup


def read_text(path: Path) -> str:
    """A local text file, or stdin for `-`; a missing or unreadable file is a usage error."""
    if str(path) == "-":
        return sys.stdin.read()
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise UsageProblem(f"{path}: no such file") from exc
    except IsADirectoryError as exc:
        raise UsageProblem(f"{path}: is a directory, not a file") from exc
    except UnicodeDecodeError as exc:
        raise UsageProblem(f"{path}: not UTF-8 text") from exc
    except OSError as exc:
        raise UsageProblem(f"{path}: cannot read it ({exc.strerror})") from exc
