"""The running stack as a local process without secrets sees it (docs/api.md): the local stack, and but for
its home the compose stack (make test-containers), whose engines test-stack.yml publishes on the loopback."""

from __future__ import annotations

import io
import os
import stat
from pathlib import Path

import asyncpg
import httpx
import nats
import pytest
from minio import Minio

from shared.contracts.common import ALL_PROCESSES, STREAM_NAME
from tests.support.stack import RunningStack

SECRET_FILES = [
    "admin-token",
    "proof/gateway.key",
    "proof/runhost.key",
    "proof/workspace.key",
    "s3-secrets.json",
    "s3-keys.json",
    "pg-passwords.json",
    "nats.conf",
    "nats/users.json",
    "nats/events.json",
]


@pytest.mark.local_stack
def test_the_home_and_its_secrets_are_private(stack: RunningStack) -> None:
    home = stack.local_home()
    _client(stack, "runhost").put_object("dossier", "runs/iso/probe.txt", io.BytesIO(b"tenant"), 6)
    # Even as root: Postgres reaches its data through a view of its own (devstack/pgview.py), not the home.
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    for name in SECRET_FILES:
        assert stat.S_IMODE((home / name).stat().st_mode) == 0o600, name
    exposed = [
        str(path.relative_to(home))
        for path in _walk(home)
        if stat.S_IMODE(path.lstat().st_mode) & 0o007 and not path.is_symlink()
    ]
    assert exposed == []
    objects = [p for p in _walk(home / "objects") if p.is_file()]
    assert any(p.name == "probe.txt" for p in objects)
    assert all(stat.S_IMODE(p.stat().st_mode) & 0o077 == 0 for p in objects)


def _client(stack: RunningStack, process: str) -> Minio:
    secret = stack.s3_secret(process)
    return Minio(
        stack.s3_endpoint(), access_key=f"dossier-{process}", secret_key=secret, secure=False, region="us-east-1"
    )


def _walk(root: Path) -> list[Path]:
    found: list[Path] = []
    for folder, dirs, files in os.walk(root):
        found += [Path(folder) / name for name in dirs + files]
    return found


def test_secrets_reach_only_the_processes_that_use_them(stack: RunningStack) -> None:
    for name in ALL_PROCESSES:
        environ = stack.process_environ(name)
        assert (b"DOSSIER_ADMIN_TOKEN" in environ) == (name == "gateway"), name
        # Proof of caller: a signer holds its own private key and no other; every process the public keys.
        assert b"DOSSIER_BUS_SECRET" not in environ, name
        assert environ.get(b"DOSSIER_PROOF_KEY") == (
            stack.proof_key(name).encode() if name in ("gateway", "runhost", "workspace") else None
        ), name
        others = [stack.proof_key(s).encode() for s in ("gateway", "runhost", "workspace") if s != name]
        assert not any(key in value for key in others for value in environ.values()), name
        assert environ[b"DOSSIER_PROOF_PUBLIC_KEYS"].count(b"=") == 3, name
        assert environ[b"DOSSIER_NATS_USER"] == name.encode()
        has_key = name in ("gateway", "runhost", "artifact", "assets")
        assert environ.get(b"DOSSIER_S3_ACCESS_KEY") == (f"dossier-{name}".encode() if has_key else None), name
        assert stack.admin_token.encode() not in b"".join(environ.values()) or name == "gateway"


async def test_the_stacks_bus_refuses_anonymous_and_keeps_internal_consumers_from_readers(
    stack: RunningStack,
) -> None:
    with pytest.raises(nats.errors.Error, match="Authorization Violation"):
        await nats.connect(stack.events_options()["servers"][0], allow_reconnect=False, max_reconnect_attempts=0)
    seen: list[str] = []

    async def record(error: Exception) -> None:
        seen.append(str(error).lower())

    reader = await nats.connect(**stack.events_options(), error_cb=record)
    try:
        # The internal consumers are in another account: the outside mirror has no such consumer.
        with pytest.raises(nats.js.errors.NotFoundError):
            await reader.jetstream(timeout=2).consumer_info(STREAM_NAME, "workspace_publication_committed")
        info = await reader.jetstream(timeout=2).stream_info(STREAM_NAME)
        assert info.config.mirror is not None and info.config.mirror.name == STREAM_NAME
        assert seen == []
    finally:
        await reader.close()


def test_the_stacks_object_store_wants_signatures_and_keeps_keys_to_their_bucket(stack: RunningStack) -> None:
    r = httpx.get(f"http://{stack.s3_endpoint()}/dossier", headers={"Origin": "https://evil.example"})
    assert r.status_code == 403 and "access-control-allow-origin" not in r.headers
    client = _client(stack, "artifact")
    assert client.bucket_exists("dossier")
    with pytest.raises(Exception, match="AccessDenied"):
        client.make_bucket("another-bucket")


async def test_the_stacks_databases_want_passwords_and_their_own_role(stack: RunningStack) -> None:
    port = stack.postgres_port()
    with pytest.raises(asyncpg.InvalidPasswordError):
        await asyncpg.connect(f"postgresql://postgres@127.0.0.1:{port}/postgres", password="")
    password = stack.pg_password("publication")
    with pytest.raises(asyncpg.InsufficientPrivilegeError):
        await asyncpg.connect(f"postgresql://publication:{password}@127.0.0.1:{port}/workspace")
    with pytest.raises(asyncpg.InsufficientPrivilegeError):
        await asyncpg.connect(f"postgresql://publication:{password}@127.0.0.1:{port}/postgres")
    conn = await asyncpg.connect(stack.dsn("workspace"))
    try:
        assert await conn.fetchval("SELECT current_user") == "workspace"
    finally:
        await conn.close()
