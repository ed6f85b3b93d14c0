"""What a parser process can reach: no secrets in its environment, no network, no new processes or files.

Checked on the real parser process (the sandbox's warm spare, confined and waiting for its job) from the
outside: its environment and limits as the kernel shows them, and a TCP connection attempted from
inside its network namespace.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from services.assets.app import limits_of
from services.assets.sandbox import Sandbox
from shared.settings import AssetsSettings

SECRETS = {
    "DOSSIER_S3_SECRET_KEY": "s3-secret-value",
    "DOSSIER_BUS_SECRET": "bus-secret-value",
    "DOSSIER_NATS_PASSWORD": "nats-password-value",
    "DOSSIER_DATABASE_URL": "postgresql://assets:db-password-value@127.0.0.1:5432/assets",
    "DOSSIER_ADMIN_TOKEN": "adm_admin-token-value",
}

# Joins a process's network namespace (CLONE_NEWNET), then tries a TCP connection to the host's loopback.
CONNECT = """
import ctypes, os, socket, sys
target, port = sys.argv[1], int(sys.argv[2])
libc = ctypes.CDLL(None, use_errno=True)
if target != "-":
    # Not root: the parser's network belongs to its user namespace (one of ours), to be joined first.
    user = target.replace("/ns/net", "/ns/user")
    if os.readlink(user) != os.readlink("/proc/self/ns/user"):
        if libc.setns(os.open(user, os.O_RDONLY), 0x10000000) != 0:
            sys.exit(f"setns into the user namespace failed: {ctypes.get_errno()}")
    fd = os.open(target, os.O_RDONLY)
    if libc.setns(fd, 0x40000000) != 0:
        sys.exit(f"setns failed: {ctypes.get_errno()}")
try:
    socket.create_connection(("127.0.0.1", port), timeout=5).close()
    print("connected")
except OSError as exc:
    print("refused", exc.errno)
"""


def children(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/task/{pid}/children").read_text().split()


@pytest.fixture
async def parser_pid(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[int]:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    sandbox = Sandbox(limits_of(AssetsSettings()), cpu_seconds=30, memory_bytes=1536 * 2**20, wall_seconds=30)
    # Confined and ready once _spawn returns: the parser proper is the one child of the process started.
    spare = await sandbox._spawn()  # held: closing its job socket would end the spare
    proc = spare.proc
    try:
        # The process started waits for its namespace's PID 1, which waits for the parser.
        [init] = children(proc.pid)
        [parser] = children(int(init))
        assert os.readlink(f"/proc/{parser}/ns/net") != os.readlink("/proc/self/ns/net")
        yield int(parser)
    finally:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()
        await sandbox.close()


def test_a_parser_sees_no_secret(parser_pid: int) -> None:
    with open(f"/proc/{parser_pid}/environ", "rb") as f:
        environ = f.read()
    names = {entry.split(b"=", 1)[0].decode() for entry in environ.split(b"\0") if entry}
    assert names <= {"PATH", "LC_ALL", "PYTHONPATH"}
    for value in SECRETS.values():
        assert value.encode() not in environ
    assert b"db-password-value" not in environ


def test_a_parser_may_not_start_processes_write_files_or_hold_many_descriptors(parser_pid: int) -> None:
    with open(f"/proc/{parser_pid}/limits") as f:
        limits = {line[:26].strip(): line[26:].split()[:2] for line in f.read().splitlines()[1:]}
    # No thread (and, by seccomp, no process); the hard limit is the headroom only the OCR path claims.
    assert limits["Max processes"] == ["0", "16"]
    assert limits["Max file size"] == ["0", "0"]
    assert limits["Max open files"] == ["64", "64"]
    assert limits["Max cpu time"][0] == "30"
    assert limits["Max address space"] == [str(1536 * 2**20)] * 2


async def test_a_parser_cannot_open_a_tcp_connection(parser_pid: int) -> None:
    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.close()

    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]

    async def attempt(namespace: str) -> str:
        probe = await asyncio.create_subprocess_exec(
            sys.executable, "-c", CONNECT, namespace, str(port), stdout=asyncio.subprocess.PIPE
        )
        out, _ = await probe.communicate()
        assert probe.returncode == 0
        return out.decode().strip()

    try:
        # The same attempt from the host's namespace reaches the listener: the refusal is the sandbox's.
        assert await attempt("-") == "connected"
        assert (await attempt(f"/proc/{parser_pid}/ns/net")).startswith("refused")
    finally:
        server.close()
        await server.wait_closed()
