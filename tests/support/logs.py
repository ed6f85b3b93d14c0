"""The stack's JSON log lines (`$DOSSIER_HOME/logs/<process>.log`), for tests that follow a request id."""

from __future__ import annotations

import json
from typing import Any

from tests.support.stack import RunningStack


def log_lines(stack: RunningStack, process: str) -> list[dict[str, Any]]:
    """A process's lines; a gateway's are those of all its workers (`gateway.log`, `gateway-w2.log`, …)."""
    lines = []
    for path in [stack.home / "logs" / f"{process}.log", *sorted((stack.home / "logs").glob(f"{process}-w*.log"))]:
        for raw in path.read_text(errors="replace").splitlines():
            if raw.startswith("{"):
                lines.append(json.loads(raw))
    return lines


def lines_with(stack: RunningStack, process: str, request_id: str) -> list[dict[str, Any]]:
    return [line for line in log_lines(stack, process) if line.get("request_id") == request_id]
