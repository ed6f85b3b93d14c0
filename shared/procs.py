"""Child processes of the local stack: start, watch, stop, with no orphans left behind.

Each child runs in its own session (a terminal's Ctrl-C reaches only the supervisor, which then stops
children in order) and asks the kernel for SIGTERM if the supervisor dies (PR_SET_PDEATHSIG).
"""

from __future__ import annotations

import ctypes
import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except OSError:
        pass


def venv_bin(name: str) -> str:
    """A console script installed next to this interpreter (nats-server, localbucket)."""
    candidate = Path(sys.executable).parent / name
    if candidate.exists():
        return str(candidate)
    raise FileNotFoundError(f"{name} is not installed next to {sys.executable}; run `make setup`")


# Ports are chosen below the kernel's ephemeral range. A port the kernel hands out for `bind(0)` comes
# from the range it also gives outgoing connections, so between the choice and the server's own bind
# seconds later any client's connection (a service's pool, a NATS client) could take it for its life, and
# the server then never starts. No outgoing connection is ever given a port below that range.
_LOWEST_PORT = 10000
_EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")


def _ephemeral_start() -> int:
    try:
        return int(_EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


# Every port this process has offered: a stack takes several at once and binds them seconds later, so a
# port offered twice (both draws still bindable) would go to two servers, and the second one never starts.
_offered: set[int] = set()


def _draws() -> Iterator[int]:
    """Candidate ports: below the ephemeral range where it leaves room, then whatever the kernel gives."""
    start = _ephemeral_start()
    if start - _LOWEST_PORT >= 1000:
        for _ in range(100):
            yield random.randrange(_LOWEST_PORT, start)
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        yield port  # closed first, so the caller can check that it is bindable


def free_port() -> int:
    """A port nothing listens on and this process has not offered before, for a server to bind soon."""
    port = next(port for port in _draws() if port not in _offered and _bindable(port))
    _offered.add(port)
    return port


def can_listen(port: int) -> bool:
    """Whether a server (with SO_REUSEADDR, as Python's HTTP servers set it) can listen on `port` now: a
    port held only by closed connections (TIME_WAIT, after a stack's restart) counts as free."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port_range(count: int) -> int:
    """The first of `count` consecutive free ports (a stack's fixed metrics ports, in tests beside a CI run)."""
    while True:
        first = free_port()
        ports = range(first + 1, first + count)
        if first + count <= 65536 and all(_bindable(port) and port not in _offered for port in ports):
            _offered.update(range(first, first + count))
            return first


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.2):
            return True
    except OSError:
        return False


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


@dataclass
class Child:
    name: str
    argv: list[str]
    env: dict[str, str]
    log_path: Path | None
    user: str | None = None
    stop_signal: signal.Signals = signal.SIGTERM
    proc: subprocess.Popen[bytes] | None = None
    restarts: int = 0
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
