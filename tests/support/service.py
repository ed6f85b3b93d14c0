"""Start one service in-process (its real bus app against real infrastructure) for service tests."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from shared.children import Child
from shared.runtime import ServiceRuntime

ROOT = Path(__file__).resolve().parents[2]


@asynccontextmanager
async def running(runtime: ServiceRuntime) -> AsyncIterator[ServiceRuntime]:
    await runtime.start()
    try:
        yield runtime
    finally:
        await runtime.stop()


def settings_from(env: dict[str, str], factory: Callable[..., Any]) -> Any:
    """Build a service's settings from an env dict without touching this process's environment."""
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        return factory()
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def service_process(name: str, env: dict[str, str], log_dir: Path) -> Child:
    """The service as its own OS process (for crash tests): `python -m services.<name>`."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("DOSSIER_")} | env
    full_env["PYTHONUNBUFFERED"] = "1"
    return Child(name, [sys.executable, "-m", f"services.{name}"], full_env, log_dir / f"{name}.log")
