"""The `dossier` command as a user runs it: a subprocess with its own environment."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.support.stack import ROOT, RunningStack


def cli_env(stack: RunningStack | None, token: str | None, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOSSIER_")}
    if stack is not None:
        env["DOSSIER_URL"] = stack.url
    if token is not None:
        env["DOSSIER_TOKEN"] = token
    return env | extra


def dossier(
    stack: RunningStack | None,
    token: str | None,
    *args: str,
    env: dict[str, str] | None = None,
    stdin: str | None = None,
    timeout: float = 300,
) -> subprocess.CompletedProcess[str]:
    """Run `python -m dossier_cli ARGS` against the stack (DOSSIER_URL/DOSSIER_TOKEN unless `env` is given)."""
    feed: dict[str, object] = {"input": stdin} if stdin is not None else {"stdin": subprocess.DEVNULL}
    return subprocess.run(
        [sys.executable, "-m", "dossier_cli", *args],
        cwd=ROOT,
        env=env if env is not None else cli_env(stack, token),
        **feed,  # type: ignore[arg-type]
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def no_traceback(done: subprocess.CompletedProcess[str]) -> bool:
    return "Traceback" not in done.stderr and "Traceback" not in done.stdout
