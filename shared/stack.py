"""`make up`: the whole Dossier stack in the foreground, supervised.

It starts NATS, PostgreSQL and the S3 server, then the gateway and every service, restarts whatever
dies, prints the gateway URL and the admin token once /v1/health is green, and stops everything in
order on Ctrl-C or SIGTERM. All state lives under $DOSSIER_HOME and survives a restart.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import secrets
import signal
import sys
import time
import urllib.error
import urllib.request
from functools import partial
from pathlib import Path
from typing import Any

from shared.contracts.common import ALL_PROCESSES, SERVICES
from shared.db import ensure_database
from shared.infra import nats_child, postgres_child, postgres_dsn, s3_child
from shared.procs import Child, free_port, port_open, wait_until, write_pid

RESTART_DELAY = 0.5
POLL_SECONDS = 0.2
HEALTH_TIMEOUT = 90.0


def _secret_file(path: Path, env_value: str | None, make: Any) -> str:
    """A secret from the environment, else the one kept in `path`, else a new one kept there."""
    if env_value:
        return str(env_value)
    if path.exists():
        return path.read_text().strip()
    value = make()
    path.touch(mode=0o600)
    path.write_text(value + "\n")
    return str(value)


def _port(env: dict[str, str], name: str) -> int:
    value = env.get(name)
    return int(value) if value else free_port()


class Stack:
    def __init__(self, env: dict[str, str] | None = None):
        self.env = dict(os.environ if env is None else env)
        self.home = Path(self.env.get("DOSSIER_HOME") or ".dossier").resolve()
        self.home.mkdir(parents=True, exist_ok=True)
        self.pid_dir = self.home / "pids"
        self.log_dir = self.home / "logs"
        self.http_port = int(self.env.get("DOSSIER_HTTP_PORT") or 8080)
        self.admin_token = _secret_file(
            self.home / "admin-token",
            self.env.get("DOSSIER_ADMIN_TOKEN"),
            lambda: f"adm_{secrets.token_urlsafe(32)}",
        )
        self.bus_secret = _secret_file(self.home / "bus-secret", None, lambda: secrets.token_urlsafe(48))
        self.s3_secret = _secret_file(self.home / "s3-secret", None, lambda: secrets.token_urlsafe(24))
        self.children: dict[str, Child] = {}
        # Each service process serves Prometheus metrics on a port of its own; the gateway on its HTTP port.
        self.metrics_ports = {name: free_port() for name in SERVICES}
        self.stopping = False
        self._lock_fd: int | None = None

    # -- start -------------------------------------------------------------------------------------

    def _lock(self) -> None:
        fd = os.open(self.home / "stack.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise SystemExit(f"another Dossier stack is already running on {self.home}") from None
        self._lock_fd = fd

    def _infra_env(self) -> dict[str, str]:
        return {k: v for k, v in self.env.items() if not k.startswith("DOSSIER_")} | {"LC_ALL": "C.UTF-8"}

    def _launch(self, child: Child) -> None:
        pid = child.start()
        write_pid(self.pid_dir, child.name, pid)
        self.children[child.name] = child

    def start_infra(self) -> None:
        base = self._infra_env()
        self.nats_port = _port(self.env, "DOSSIER_NATS_PORT")
        self.pg_port = _port(self.env, "DOSSIER_PG_PORT")
        self.s3_port = _port(self.env, "DOSSIER_S3_PORT")
        infra = [
            (nats_child(self.home, self.nats_port, base), self.nats_port),
            (postgres_child(self.home, self.pg_port, base), self.pg_port),
            (s3_child(self.home, self.s3_port, base), self.s3_port),
        ]
        for child, _ in infra:
            self._launch(child)
        for child, port in infra:
            wait_until(partial(port_open, port), timeout=60, what=child.name, alive=child.alive)
        asyncio.run(self._create_databases())

    async def _create_databases(self) -> None:
        # Postgres accepts TCP a moment before it accepts logins; retry until the deadline.
        deadline = time.monotonic() + 30
        for name in ALL_PROCESSES:
            while True:
                try:
                    await ensure_database(postgres_dsn(self.pg_port, name))
                    break
                except Exception:
                    if time.monotonic() > deadline:
                        raise
                    await asyncio.sleep(0.1)

    def service_env(self, name: str) -> dict[str, str]:
        env = dict(self.env)
        env.update(
            {
                "DOSSIER_HOME": str(self.home),
                "DOSSIER_NATS_URL": f"nats://127.0.0.1:{self.nats_port}",
                "DOSSIER_DATABASE_URL": postgres_dsn(self.pg_port, name),
                "DOSSIER_S3_ENDPOINT": f"127.0.0.1:{self.s3_port}",
                "DOSSIER_S3_ACCESS_KEY": "dossier",
                "DOSSIER_S3_SECRET_KEY": self.s3_secret,
                "DOSSIER_BUS_SECRET": self.bus_secret,
                "DOSSIER_ADMIN_TOKEN": self.admin_token,
                "DOSSIER_HTTP_PORT": str(self.http_port),
                "PYTHONUNBUFFERED": "1",
            }
        )
        if name in self.metrics_ports:
            env["DOSSIER_METRICS_PORT"] = str(self.metrics_ports[name])
        return env

    def start_services(self) -> None:
        for name in ALL_PROCESSES:
            argv = [sys.executable, "-m", f"services.{name}"]
            self._launch(Child(name, argv, self.service_env(name), self.log_dir / f"{name}.log"))

    def write_state(self) -> None:
        state = {
            "gateway_url": f"http://127.0.0.1:{self.http_port}",
            "nats_url": f"nats://127.0.0.1:{self.nats_port}",
            "nats_urls": [f"nats://127.0.0.1:{self.nats_port}"],
            "postgres_port": self.pg_port,
            "s3_endpoint": f"127.0.0.1:{self.s3_port}",
            "services": list(SERVICES),
            "metrics": {
                "gateway": f"http://127.0.0.1:{self.http_port}/metrics",
                **{name: f"http://127.0.0.1:{port}/metrics" for name, port in self.metrics_ports.items()},
            },
            "supervisor_pid": os.getpid(),
        }
        (self.home / "stack.json").write_text(json.dumps(state, indent=2) + "\n")

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.http_port}/v1/health", timeout=2) as r:
                return bool(r.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    # -- supervise ---------------------------------------------------------------------------------

    def supervise_once(self) -> None:
        for child in list(self.children.values()):
            if self.stopping or child.alive():
                continue
            code = child.proc.returncode if child.proc else None
            if time.monotonic() - child.started_at < RESTART_DELAY:
                continue
            child.restarts += 1
            print(f"dossier: {child.name} exited ({code}); restarting it", file=sys.stderr, flush=True)
            self._launch(child)

    def run(self) -> int:
        self._lock()
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)
        try:
            self.start_infra()
            self.start_services()
            self.write_state()
            announced = False
            started = time.monotonic()
            while not self.stopping:
                self.supervise_once()
                if not announced and self.healthy():
                    announced = True
                    self._announce()
                elif not announced and time.monotonic() - started > HEALTH_TIMEOUT:
                    print(f"dossier: still not healthy; see the logs in {self.log_dir}", file=sys.stderr)
                    started = time.monotonic()
                time.sleep(POLL_SECONDS)
        finally:
            self.stop()
        return 0

    def _announce(self) -> None:
        print(
            "Dossier is up.\n"
            f"  gateway:     http://127.0.0.1:{self.http_port}\n"
            f"  admin token: {self.admin_token}\n"
            f"  state:       {self.home}\n"
            "Stop it with Ctrl-C.",
            flush=True,
        )

    def _on_signal(self, signum: int, _frame: object) -> None:
        self.stopping = True

    def stop(self) -> None:
        self.stopping = True
        # Edges first (gateway, services), then the object store and the bus, the database last.
        order = ["gateway", *[s for s in SERVICES], "s3", "nats", "postgres"]
        for name in order:
            child = self.children.get(name)
            if child is not None:
                child.stop()
                (self.pid_dir / f"{name}.pid").unlink(missing_ok=True)
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None
        print("Dossier stopped.", flush=True)


def main() -> int:
    return Stack().run()


if __name__ == "__main__":
    raise SystemExit(main())
