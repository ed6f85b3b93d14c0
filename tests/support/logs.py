"""The stack's JSON log lines (the local stack's `$DOSSIER_HOME/logs/<process>.log`, a compose service's
container log), for tests that follow a request id."""

from __future__ import annotations

import json
from typing import Any

from tests.support.stack import RunningStack


def log_lines(stack: RunningStack, process: str) -> list[dict[str, Any]]:
    """A process's lines; a gateway's are those of all its workers (RunningStack.log_text)."""
    lines = []
    # JSON lines end at "\n" alone: str.splitlines would also cut at the U+2028 or \x1c a logged path may hold.
    for raw in stack.log_text(process).split("\n"):
        if raw.startswith("{"):
            lines.append(json.loads(raw))
    return lines


def lines_with(stack: RunningStack, process: str, request_id: str) -> list[dict[str, Any]]:
    return [line for line in log_lines(stack, process) if line.get("request_id") == request_id]
