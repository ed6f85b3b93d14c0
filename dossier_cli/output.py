"""What the CLI prints: the API's JSON with `--json` (and nothing else on stdout), else Rich tables and records.

Data is never read as Rich markup: a title like "[red]" prints as typed.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

from dossier_cli.client import wants_json


def _console(stderr: bool) -> Console:
    stream = sys.stderr if stderr else sys.stdout
    # Piped output is read by programs and people with wide terminals: never wrap a row or cut an id.
    width = None if stream.isatty() else 10_000
    return Console(file=stream, markup=False, highlight=False, emoji=False, width=width, soft_wrap=not stream.isatty())


def out() -> Console:
    return _console(stderr=False)


def err() -> Console:
    return _console(stderr=True)


def print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def emit(data: Any, human: Callable[[Any], None] | None = None) -> None:
    """The one way a command prints its result."""
    if wants_json():
        print_json(data)
    elif human is not None:
        human(data)
    else:
        record(data)


def cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def table(header: Sequence[str], rows: Iterable[Sequence[Any]], *, console: Console | None = None) -> None:
    grid = Table(box=None, show_edge=False, pad_edge=False, header_style="bold", padding=(0, 2, 0, 0))
    for name in header:
        grid.add_column(name, overflow="fold")
    for row in rows:
        grid.add_row(*(cell(value) for value in row))
    console = console or out()
    if console.is_terminal:
        console.print(grid)
        return
    # Piped: plain lines without the padding Rich gives the last column.
    with console.capture() as captured:
        console.print(grid)
    console.file.write("".join(line.rstrip() + "\n" for line in captured.get().splitlines()))


def record(data: Any, fields: Sequence[str] | None = None) -> None:
    """A JSON object as `field: value` lines (nested values compact); anything else as JSON."""
    if not isinstance(data, dict):
        if data is not None:
            out().print(cell(data))
        return
    names = [f for f in fields if f in data] if fields else list(data)
    width = max((len(n) for n in names), default=0)
    console = out()
    for name in names:
        console.print(f"{name + ':':<{width + 1}} {cell(data[name])}")


def ref(value: dict[str, Any] | None) -> str:
    if not value:
        return "-"
    version = value.get("version")
    name = value.get("id") or value.get("publication_id") or "?"
    kind = f"{value['kind']}:" if value.get("kind") else ""
    return f"{kind}{name}@{version if version is not None else 'latest'}"
