"""The stack's JSON log lines (`$DOSSIER_HOME/logs/<process>.log`), for tests that follow a request id."""

from __future__ import annotations

import json
from typing import Any

from tests.support.stack import RunningStack


def log_lines(stack: RunningStack, process: str) -> list[dict[str, Any]]:
    lines = []
    # Lines end with "\n" only: JSON leaves U+0085 or U+2028 in a logged path unescaped, and splitlines()
    # would cut the line there.
    for raw in (stack.home / "logs" / f"{process}.log").read_text(errors="replace").split("\n"):
        if raw.startswith("{"):
            lines.append(json.loads(raw))
    return lines


def lines_with(stack: RunningStack, process: str, request_id: str) -> list[dict[str, Any]]:
    return [line for line in log_lines(stack, process) if line.get("request_id") == request_id]
