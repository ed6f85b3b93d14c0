"""The whole local stack (`python -m devstack.stack`) as a subprocess, for e2e and stack tests."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from devstack.infra import PG_SUPERUSER, postgres_dsn
from devstack.procs import free_port
from devstack.stack import OBJECT_USERS, SECRET_VARIABLES, s3_access_key
from dossier_cli.logread import backups, kind_of
from shared.natsauth import inbox_prefix
from shared.outside import EVENTS_USER
from shared.proof import SIGNERS, public_key_text, public_keys_text
from tests.support.compose import ComposeStack

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class RunningStack:
    # None for the compose stack (make test-containers): its home, pid files and logs are in its containers.
    home: Path | None
    url: str
    admin_token: str
    proc: subprocess.Popen[bytes] | None
    output: Path | None
    # Approved import roots by name (DOSSIER_APPROVED_ROOTS), when the starter configured some.
    approved_roots: dict[str, Path] = field(default_factory=dict)
    # The DOSSIER_ settings the stack was started with (beyond its home and port).
    env: dict[str, str] = field(default_factory=dict)
    # The compose stack's project, secrets and engine ports (`make test-containers`); None for a local one.
    compose: ComposeStack | None = None

    def local_home(self) -> Path:
        """The local stack's $DOSSIER_HOME: a test that reads it is marked `local_stack`."""
        if self.home is None:
            raise AssertionError("this test reads the local stack's home: mark it local_stack")
        return self.home

    def state(self) -> dict[str, object]:
        return dict(json.loads((self.local_home() / "stack.json").read_text()))

    def events_options(self) -> dict[str, Any]:
        """`nats.connect` options of the read-only external subscriber ($DOSSIER_HOME/nats/events.json)."""
        if self.compose is not None:
            return self.compose_nats_options(EVENTS_USER)
        described = json.loads((self.local_home() / "nats" / "events.json").read_text())
        return {"servers": described["servers"], "user": described["user"], "password": described["password"]}

    def nats_options(self, process: str) -> dict[str, Any]:
        """`nats.connect` options of one process's own user, for tests that play that process."""
        if self.compose is not None:
            return self.compose_nats_options(process) | {"inbox_prefix": inbox_prefix(process)}
        password = json.loads((self.local_home() / "nats" / "users.json").read_text())[process]
        return {
            "servers": [self.state()["nats_url"]],
            "user": process,
            "password": password,
            "inbox_prefix": inbox_prefix(process),
        }

    def compose_nats_options(self, user: str) -> dict[str, Any]:
        assert self.compose is not None
        password = self.compose.secret(f"NATS_{user.upper()}_PASSWORD")
        return {"servers": [f"nats://127.0.0.1:{self.compose.port('nats')}"], "user": user, "password": password}

    def dsn(self, database: str) -> str:
        """The DSN of a service's database with that service's own role."""
        return postgres_dsn(self.postgres_port(), database, database, self.pg_password(database))

    def admin_dsn(self, database: str = "postgres") -> str:
        """The DSN of a database with PostgreSQL's superuser: for what no service role may do (VACUUM of
        every table, CHECKPOINT, server settings, a database of its own)."""
        return postgres_dsn(self.postgres_port(), database, PG_SUPERUSER, self.pg_password(PG_SUPERUSER))

    def postgres_port(self) -> int:
        if self.compose is not None:
            return self.compose.port("postgres")
        return int(str(self.state()["postgres_port"]))

    def pg_password(self, role: str) -> str:
        if self.compose is not None:
            return self.compose.secret(f"PG_{role.upper()}_PASSWORD")
        return str(json.loads((self.local_home() / "pg-passwords.json").read_text())[role])

    def s3_endpoint(self) -> str:
        if self.compose is not None:
            return f"127.0.0.1:{self.compose.port('minio')}"
        return str(self.state()["s3_endpoint"])

    def s3_secret(self, process: str) -> str:
        """The secret of a process's own object-store key (its access key is `s3_access_key(process)`)."""
        if self.compose is not None:
            return self.compose.secret(f"S3_{process.upper()}_SECRET")
        return str(json.loads((self.local_home() / "s3-secrets.json").read_text())[process])

    def process_environ(self, name: str) -> dict[bytes, bytes]:
        """The environment a service's process was given: its /proc entry, or its container's."""
        if self.compose is not None:
            return {k.encode(): v.encode() for k, v in self.compose.environ(name).items()}
        with open(f"/proc/{self.pid(name)}/environ", "rb") as f:
            return dict(e.split(b"=", 1) for e in f.read().split(b"\0") if b"=" in e)

    def log_text(self, name: str) -> str:
        """What a service's processes have written: their file with its rotated backups, or the container's
        log. A service's name gives the lines of all its processes (a gateway's workers, replicas); a process's
        name (`gateway-w2`, `workspace.2`) only its own."""
        if self.compose is not None:
            return self.compose.log_text(name)
        logs = self.local_home() / "logs"
        kind = kind_of(name) or name
        files = [*backups(logs, kind), logs / f"{kind}.log"]
        text = "\n".join(path.read_text(errors="replace") for path in files if path.exists())
        if name == kind:
            return text
        return "\n".join(
            raw for raw in text.split("\n") if raw.startswith("{") and json.loads(raw).get("process") == name
        )

    def pid(self, name: str) -> int:
        return int((self.local_home() / "pids" / f"{name}.pid").read_text())

    def kill(self, name: str) -> None:
        """SIGKILL a service's process and return once its supervisor runs a new one (the local stack's,
        or the compose stack's container)."""
        if self.compose is not None:
            self.compose.kill(name)
            return
        victim = self.pid(name)
        os.kill(victim, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while not (self.pid(name) != victim and alive(self.pid(name))):
            if time.monotonic() > deadline:
                raise AssertionError(f"no new {name} within 30 s")
            time.sleep(0.05)

    def service_env(self, name: str, extra: dict[str, str] | None = None) -> dict[str, str]:
        """The environment the supervisor gives `name` (its own credentials only), for a second process of it."""
        state = self.state()
        base = {k: v for k, v in os.environ.items() if not k.startswith("DOSSIER_")}
        stack_env = {k: v for k, v in self.env.items() if k.startswith("DOSSIER_") and k not in SECRET_VARIABLES}
        env = base | stack_env
        env |= {
            "DOSSIER_HOME": str(self.local_home()),
            "DOSSIER_NATS_URL": str(state["nats_url"]),
            "DOSSIER_NATS_USER": name,
            "DOSSIER_NATS_PASSWORD": json.loads((self.local_home() / "nats" / "users.json").read_text())[name],
            "DOSSIER_DATABASE_URL": self.dsn(name),
            "DOSSIER_S3_ENDPOINT": str(state["s3_endpoint"]),
            "PYTHONUNBUFFERED": "1",
        }
        if name in OBJECT_USERS:
            env["DOSSIER_S3_ACCESS_KEY"] = s3_access_key(name)
            env["DOSSIER_S3_SECRET_KEY"] = json.loads((self.local_home() / "s3-secrets.json").read_text())[name]
        keys = {signer: self.proof_key(signer) for signer in SIGNERS}
        env["DOSSIER_PROOF_PUBLIC_KEYS"] = public_keys_text({n: public_key_text(k) for n, k in keys.items()})
        if name in keys:
            env["DOSSIER_PROOF_KEY"] = keys[name]
        if name == "gateway":
            env["DOSSIER_ADMIN_TOKEN"] = self.admin_token
        return env | (extra or {})

    def proof_key(self, signer: str) -> str:
        """A signer's private key as the stack keeps it (a test that plays that signer uses it)."""
        if self.compose is not None:
            return self.compose.secret(f"PROOF_{signer.upper()}_KEY")
        return (self.local_home() / "proof" / f"{signer}.key").read_text().strip()

    def token(self, scope: str, principal: str = "tester") -> str:
        r = httpx.post(
            f"{self.url}/v1/admin/tokens",
            json={"scope": scope, "principal": principal},
            headers={"Authorization": f"Bearer {self.admin_token}"},
        )
        r.raise_for_status()
        return str(r.json()["token"])


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def external_stack(url: str, admin_token: str, compose: ComposeStack | None = None) -> RunningStack:
    """The compose stack of `make test-containers`, reached by its URL and admin token, and, for tests that
    play a process or kill one, by its engines' published ports, its secrets and docker."""
    return RunningStack(
        home=None, url=url.rstrip("/"), admin_token=admin_token, proc=None, output=None, compose=compose
    )


# The suite's own load is above a person's: one admin token issues tokens in loops, probes poll twenty
# times a second, schemathesis sends as fast as it can. tests/service/gateway/test_rates.py holds the
# contract's default rate to account; a stack's starter may still set its own.
TEST_RATE = {"DOSSIER_RATE_PER_TOKEN": "1000", "DOSSIER_RATE_BURST": "2000"}


# The one scope the session's stack (tests/conftest.py) gives an approved import root of its own, `private`.
ROOT_SCOPE = "rootscope"
# Every home a test stack ran on: the session's end removes the system users their Postgres ran as.
STARTED_HOMES: list[Path] = []


def start_stack(
    home: Path, *, timeout: float = 120, extra_env: dict[str, str] | None = None, root: Path = ROOT
) -> RunningStack:
    """The local stack on `home`, from the code in `root` (this checkout; an earlier release's tree for the
    upgrade tests), once it says it is up."""
    home.mkdir(parents=True, exist_ok=True)
    STARTED_HOMES.append(home)
    port = int((extra_env or {}).get("DOSSIER_HTTP_PORT") or free_port())
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOSSIER_")}
    env.update({"DOSSIER_HOME": str(home), "DOSSIER_HTTP_PORT": str(port)}, **(TEST_RATE | (extra_env or {})))
    output = home / "stack.out"
    output.touch(mode=0o600)
    offset = output.stat().st_size if output.exists() else 0
    with open(output, "ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "devstack.stack"], cwd=root, env=env, stdout=out, stderr=subprocess.STDOUT
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
                env=TEST_RATE | (extra_env or {}),
            )
        time.sleep(0.1)
    stop_stack(proc)
    raise TimeoutError(f"the stack did not come up:\n{output.read_text()[-3000:]}")


@contextmanager
def stack_running(home: Path, *, extra_env: dict[str, str] | None = None) -> Iterator[RunningStack]:
    """`start_stack`, stopped when the block ends (a module's own stack)."""
    running = start_stack(home, extra_env=extra_env)
    try:
        yield running
    finally:
        stop_stack(running.proc)


def stop_stack(proc: subprocess.Popen[bytes], timeout: float = 60) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
