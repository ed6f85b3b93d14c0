"""Ports and binaries of the local stack: free ports below the ephemeral range, and the engines' console
scripts beside this interpreter. Supervision itself is shared/children.py."""

from __future__ import annotations

import collections
import errno
import random
import socket
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path


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

# The same holds between processes (`make test` runs three sessions at once, each starting stacks): an offered
# port is also claimed by binding an abstract UNIX socket named after it, which no other process can bind
# while this one holds it, and which the kernel lets go when this process ends (a crash leaves nothing
# behind). A process holds its latest claims only: a server binds its port seconds after the offer.
CLAIM_NAME = "\0dossier-port-{}"
CLAIMS_HELD = 64
_claims: collections.deque[socket.socket] = collections.deque()


def _claim(port: int) -> bool:
    """Claims `port` for this process; false when another process holds its claim. Where a claim cannot be
    made at all (no abstract sockets), nothing is claimed and the port counts as free."""
    claim = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        claim.bind(CLAIM_NAME.format(port))
    except OSError as exc:
        claim.close()
        return exc.errno != errno.EADDRINUSE
    _claims.append(claim)
    while len(_claims) > CLAIMS_HELD:
        _claims.popleft().close()
    return True


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
    """A port nothing listens on, that this process has not offered before and that no other process offered
    lately, for a server to bind soon."""
    port = next(port for port in _draws() if port not in _offered and _bindable(port) and _claim(port))
    _offered.add(port)
    return port


def reserve(ports: Iterable[int]) -> None:
    """Ports set for a stack's servers (in its settings, or kept in its home): never drawn for another of them,
    and claimed against other processes where none claimed them first."""
    for port in ports:
        if port not in _offered:
            _claim(port)
            _offered.add(port)


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


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.2):
            return True
    except OSError:
        return False
