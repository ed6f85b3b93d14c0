"""The whole local stack (`python -m shared.stack`) as a subprocess, for e2e and stack tests."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from shared.infra import postgres_dsn
from shared.procs import free_port

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class RunningStack:
    home: Path
    url: str
    admin_token: str
    proc: subprocess.Popen[bytes]
    output: Path
    # Approved import roots by name (DOSSIER_APPROVED_ROOTS), when the starter configured some.
    approved_roots: dict[str, Path] = field(default_factory=dict)
    # The DOSSIER_ settings the stack was started with (beyond its home and port).
    env: dict[str, str] = field(default_factory=dict)

    def state(self) -> dict[str, object]:
        return dict(json.loads((self.home / "stack.json").read_text()))

    def pid(self, name: str) -> int:
        return int((self.home / "pids" / f"{name}.pid").read_text())

    def service_env(self, name: str, extra: dict[str, str] | None = None) -> dict[str, str]:
        """The environment the supervisor gives `name`, for a second process of it on the same stack."""
        state = self.state()
        base = {k: v for k, v in os.environ.items() if not k.startswith("DOSSIER_")}
        stack_env = {k: v for k, v in self.env.items() if k.startswith("DOSSIER_")}
        return (
            base
            | stack_env
            | {
                "DOSSIER_HOME": str(self.home),
                "DOSSIER_NATS_URL": str(state["nats_url"]),
                "DOSSIER_DATABASE_URL": postgres_dsn(int(str(state["postgres_port"])), name),
                "DOSSIER_S3_ENDPOINT": str(state["s3_endpoint"]),
                "DOSSIER_S3_ACCESS_KEY": "dossier",
                "DOSSIER_S3_SECRET_KEY": (self.home / "s3-secret").read_text().strip(),
                "DOSSIER_BUS_SECRET": (self.home / "bus-secret").read_text().strip(),
                "DOSSIER_ADMIN_TOKEN": self.admin_token,
                "PYTHONUNBUFFERED": "1",
            }
            | (extra or {})
        )

    def token(self, scope: str, principal: str = "tester") -> str:
        r = httpx.post(
            f"{self.url}/v1/admin/tokens",
            json={"scope": scope, "principal": principal},
            headers={"Authorization": f"Bearer {self.admin_token}"},
        )
        r.raise_for_status()
        return str(r.json()["token"])


def start_stack(home: Path, *, timeout: float = 120, extra_env: dict[str, str] | None = None) -> RunningStack:
    home.mkdir(parents=True, exist_ok=True)
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOSSIER_")}
    env.update({"DOSSIER_HOME": str(home), "DOSSIER_HTTP_PORT": str(port)}, **(extra_env or {}))
    output = home / "stack.out"
    offset = output.stat().st_size if output.exists() else 0
    with open(output, "ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "shared.stack"], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT
        )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the stack exited early:\n{output.read_text()[-3000:]}")
        if "Dossier is up" in output.read_text()[offset:]:
            return RunningStack(
                home,
                f"http://127.0.0.1:{port}",
                (home / "admin-token").read_text().strip(),
                proc,
                output,
                env=dict(extra_env or {}),
            )
        time.sleep(0.1)
    stop_stack(proc)
    raise TimeoutError(f"the stack did not come up:\n{output.read_text()[-3000:]}")


def stop_stack(proc: subprocess.Popen[bytes], timeout: float = 60) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
