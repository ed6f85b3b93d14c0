"""The docker compose stack of `make test-containers` as the e2e tests reach it: its project name (to find
a service's container by compose's labels), the secrets of its .env (deploy/make-env.sh), and the engines'
ports that deploy/containers/test-stack.yml publishes on the host's loopback for tests that play a process."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

# Debian's docker CLI (20.10): the engine this project's container path installs (.ci/run).
DOCKER = "/usr/bin/docker" if os.path.exists("/usr/bin/docker") else (shutil.which("docker") or "docker")
# The ports test-stack.yml publishes, by service: the port inside its container.
INNER_PORTS = {"nats": 4222, "postgres": 5432, "minio": 9000}
ROOT = Path(__file__).resolve().parents[2]


def compose_cli() -> list[str]:
    """`docker compose` where the CLI has it, else Debian's docker-compose (as test-containers.sh picks)."""
    plugin = subprocess.run([DOCKER, "compose", "version"], capture_output=True, timeout=60)
    return [DOCKER, "compose"] if plugin.returncode == 0 else ["docker-compose"]


def compose_stack_url() -> str | None:
    """DOSSIER_TEST_STACK_URL: the e2e tests run against the compose stack of `make test-containers`."""
    return os.environ.get("DOSSIER_TEST_STACK_URL") or None


def read_env_file(path: Path) -> dict[str, str]:
    """KEY=VALUE lines as make-env.sh writes them (a value in single quotes loses them)."""
    values: dict[str, str] = {}
    for line in path.read_text().splitlines():
        key, sep, value = line.partition("=")
        if sep and not key.startswith("#"):
            values[key.strip()] = value.strip().removeprefix("'").removesuffix("'")
    return values


def docker(*args: str, timeout: float = 60) -> str:
    done = subprocess.run([DOCKER, *args], capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"docker {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout.strip()


@dataclass
class ComposeStack:
    project: str
    secrets: dict[str, str] = field(repr=False)
    # Its .env (deploy/make-env.sh); its files are those of COMPOSE_FILE, which test-containers.sh sets.
    env_file: Path = Path(".env")

    @classmethod
    def from_env(cls, project: str, env_file: str) -> ComposeStack:
        return cls(project, read_env_file(Path(env_file)), Path(env_file).resolve())

    def compose_env(self, **extra: str) -> dict[str, str]:
        """The environment in which compose, or a script of deploy/ that runs it, acts on this project."""
        return os.environ | {"COMPOSE_PROJECT_NAME": self.project} | extra

    def down(self) -> None:
        """Stop and remove the project's containers, and its volumes with them."""
        argv = [*compose_cli(), "--env-file", str(self.env_file), "down", "-v", "--remove-orphans"]
        done = subprocess.run(argv, cwd=ROOT, env=self.compose_env(), capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            raise RuntimeError(f"compose down of {self.project}: {done.stderr.strip()}")

    def container(self, service: str) -> str:
        """The id of the service's one container (docker-compose v1 and v2 label them alike)."""
        found = docker(
            "ps", "-aq",
            "--filter", f"label=com.docker.compose.project={self.project}",
            "--filter", f"label=com.docker.compose.service={service}",
        ).split()  # fmt: skip
        if len(found) != 1:
            raise RuntimeError(f"{len(found)} containers of {service} in compose project {self.project}")
        return found[0]

    def port(self, service: str) -> int:
        """The host port (on 127.0.0.1) that test-stack.yml gave the service's engine."""
        mapping = docker("port", self.container(service), str(INNER_PORTS[service])).splitlines()[0]
        return int(mapping.rsplit(":", 1)[1])

    def secret(self, name: str) -> str:
        return self.secrets[name]

    def environ(self, service: str) -> dict[str, str]:
        """The environment the service's container was given (its image's and compose's)."""
        entries = json.loads(docker("inspect", "--format", "{{json .Config.Env}}", self.container(service)))
        return dict(entry.split("=", 1) for entry in entries)

    def log_text(self, service: str) -> str:
        """The container's log (stdout and stderr, where the services write their JSON lines)."""
        done = subprocess.run([DOCKER, "logs", self.container(service)], capture_output=True, text=True, timeout=60)
        if done.returncode != 0:
            raise RuntimeError(f"docker logs {service}: {done.stderr.strip()}")
        return done.stdout + done.stderr

    def state(self, service: str) -> dict[str, object]:
        return dict(json.loads(docker("inspect", "--format", "{{json .State}}", self.container(service))))

    def kill(self, service: str, timeout: float = 60) -> None:
        """SIGKILL the service's process from the host, as a crash: Docker sees it exit and its restart
        policy (`restart: unless-stopped`) starts the container again (`docker kill` would count as a
        manual stop, which the policy leaves stopped). Returns once the new one runs."""
        before = self.state(service)
        os.kill(int(str(before["Pid"])), signal.SIGKILL)
        deadline = time.monotonic() + timeout
        while True:
            now = self.state(service)
            if now["Running"] and now["StartedAt"] != before["StartedAt"]:
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"{service} was not restarted within {timeout} s: {now}")
            time.sleep(0.2)


def compose_approved_roots() -> dict[str, Path]:
    """The approved import roots test-stack.yml mounts into the assets container, by name, as host folders
    (DOSSIER_TEST_STACK_ROOTS holds `docs/` and `private/`, as the local stack's starter makes them)."""
    roots = Path(os.environ["DOSSIER_TEST_STACK_ROOTS"])
    return {"docs": roots / "docs", "private": roots / "private"}
