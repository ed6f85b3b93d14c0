"""Secrets generated once and kept under $DOSSIER_HOME: files of mode 0600 in folders of mode 0700.

Every secret the local stack makes (the admin token, the proof-of-caller keys, the NATS, S3 and PostgreSQL
credentials) goes through here, so none is ever written with a wider mode, even for an instant.
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

SECRET_MODE = 0o600
FOLDER_MODE = 0o700


def new_password() -> str:
    return secrets.token_urlsafe(24)


def private_folder(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(FOLDER_MODE)
    return path


def write_secret(path: Path, text: str) -> None:
    """Write `text` to `path` atomically, created 0600 (never readable by others, not even while written)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, SECRET_MODE)
    with os.fdopen(fd, "w") as out:
        out.write(text)
    os.replace(tmp, path)


def secret_value(path: Path, env_value: str | None, make: Callable[[], str]) -> str:
    """A secret from the environment, else the one kept in `path`, else a new one kept there."""
    if env_value:
        return str(env_value)
    if path.exists():
        path.chmod(SECRET_MODE)
        return path.read_text().strip()
    value = make()
    write_secret(path, value + "\n")
    return value


def secret_table(path: Path, names: Iterable[str], make: Callable[[], str] = new_password) -> dict[str, str]:
    """`{name: secret}` kept as JSON in `path`: existing entries are kept, missing ones are added."""
    table: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
    missing = [n for n in names if not isinstance(table.get(n), str)]
    for name in missing:
        table[name] = make()
    if missing or not path.exists():
        write_secret(path, json.dumps(table, indent=2) + "\n")
    path.chmod(SECRET_MODE)
    return {str(k): str(v) for k, v in table.items()}
