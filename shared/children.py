"""Child processes under a supervisor (the local stack's, or the gateway's parent of its workers in a
container): start, watch, stop, with no orphans left behind.

Each child runs in its own session (a terminal's Ctrl-C reaches only the supervisor, which then stops
children in order) and asks the kernel for SIGTERM if the supervisor dies (PR_SET_PDEATHSIG).
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except OSError:
        pass


def wait_until(
    probe: Callable[[], bool], *, timeout: float, what: str, alive: Callable[[], bool] | None = None
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if probe():
            return
        if alive is not None and not alive():
            raise RuntimeError(f"{what}: the process exited while starting")
        time.sleep(0.05)
    raise TimeoutError(f"{what} did not become ready within {timeout:.0f}s")


def wait_for_file(path: Path | None, timeout: float = 120.0) -> None:
    """Returns once `path` exists (at once for None): the local stack's gate for processes it starts while
    its servers are still starting (DOSSIER_INFRA_READY_FILE)."""
    if path is not None:
        wait_until(path.exists, timeout=timeout, what=f"the stack's servers ({path})")


def worker_name(process: str, worker: int) -> str:
    """Worker 1 of a gateway keeps its process's name (`gateway`, `gateway.2`); worker w is `<name>-w<w>`."""
    return process if worker == 1 else f"{process}-w{worker}"


def service_of(process: str) -> str:
    """The service a process runs: `runhost.2` → `runhost`, `gateway.2-w3` → `gateway`, `nats.3` → `nats`."""
    return process.partition("-w")[0].partition(".")[0]


@dataclass
class Child:
    name: str
    argv: list[str]
    env: dict[str, str]
    log_path: Path | None
    user: str | None = None
    stop_signal: signal.Signals = signal.SIGTERM
    proc: subprocess.Popen[bytes] | None = None
    started_at: float = field(default=0.0)

    def start(self) -> int:
        if self.log_path is None:
            return self._spawn(None)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            return self._spawn(log)

    def _spawn(self, log: BinaryIO | None) -> int:
        """`log` takes the child's output; None leaves it the supervisor's own (a container's log)."""
        # With only `user`, the child would keep the supervisor's groups (root's, when it runs as root).
        group = system_group(self.user) if self.user else None
        self.proc = subprocess.Popen(
            self.argv,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT if log is not None else None,
            start_new_session=True,
            preexec_fn=_die_with_parent,
            user=self.user,
            group=group,
            extra_groups=[] if self.user else None,
        )
        self.started_at = time.monotonic()
        return self.proc.pid

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 15.0) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            self.proc.send_signal(self.stop_signal)
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
        except ProcessLookupError:
            pass


def system_group(user: str) -> int:
    import pwd

    return pwd.getpwnam(user).pw_gid


def write_pid(pid_dir: Path, name: str, pid: int) -> None:
    pid_dir.mkdir(parents=True, exist_ok=True)
    tmp = pid_dir / f".{name}.pid.tmp"
    tmp.write_text(f"{pid}\n")
    os.replace(tmp, pid_dir / f"{name}.pid")
