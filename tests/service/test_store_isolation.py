"""The object store and PostgreSQL refuse whoever holds no secret (docs/security.md)."""

from __future__ import annotations

import asyncio
import io
import os
import pwd
import signal
import stat
import uuid
from collections.abc import Callable
from pathlib import Path

import asyncpg
import httpx
import pytest
from minio import Minio

from devstack.infra import (
    PG_SUPERUSER,
    pg_folders,
    pg_run,
    postgres_argv,
    postgres_child,
    postgres_dsn,
    provision_database,
    provision_roles,
)
from devstack.procs import free_port, port_open
from shared.children import Child, wait_until
from shared.db import Database
from tests.support.infra import Infra

FOREIGN = {"Origin": "https://evil.example"}


def _signed_client(infra: Infra, service: str) -> Minio:
    access_key, secret_key = infra.s3_keys[service]
    return Minio(infra.s3_endpoint, access_key=access_key, secret_key=secret_key, secure=False, region="us-east-1")


@pytest.fixture
def bucket_with_object(infra: Infra) -> tuple[str, str]:
    bucket, key = f"iso-{uuid.uuid4().hex[:10]}", "sha256/ab/secret"
    client = _signed_client(infra, "assets")
    client.make_bucket(bucket)
    client.put_object(bucket, key, io.BytesIO(b"tenant data"), 11)
    return bucket, key


def test_unsigned_requests_to_the_object_store_are_refused(infra: Infra, bucket_with_object: tuple[str, str]) -> None:
    bucket, key = bucket_with_object
    base = f"http://{infra.s3_endpoint}"
    for method, path in [("GET", "/"), ("GET", f"/{bucket}"), ("GET", f"/{bucket}/{key}"), ("PUT", f"/{bucket}/x")]:
        r = httpx.request(method, base + path, content=b"x" if method == "PUT" else None)
        assert r.status_code == 403, (method, path, r.status_code)
        assert "AccessDenied" in r.text and b"tenant data" not in r.content


def test_a_forged_signature_is_refused(infra: Infra, bucket_with_object: tuple[str, str]) -> None:
    bucket, key = bucket_with_object
    access_key, _ = infra.s3_keys["assets"]
    forged = Minio(
        infra.s3_endpoint, access_key=access_key, secret_key="not-the-secret", secure=False, region="us-east-1"
    )
    with pytest.raises(Exception, match="SignatureDoesNotMatch"):
        forged.get_object(bucket, key)
    stranger = Minio(infra.s3_endpoint, access_key="nobody", secret_key="x", secure=False, region="us-east-1")
    with pytest.raises(Exception, match="InvalidAccessKeyId"):
        stranger.get_object(bucket, key)


def test_no_foreign_origin_may_read_the_object_store(infra: Infra, bucket_with_object: tuple[str, str]) -> None:
    bucket, key = bucket_with_object
    url = f"http://{infra.s3_endpoint}/{bucket}/{key}"
    preflight = httpx.options(url, headers=FOREIGN | {"Access-Control-Request-Method": "GET"})
    assert preflight.status_code == 403
    assert "access-control-allow-origin" not in preflight.headers
    anonymous = httpx.get(url, headers=FOREIGN)
    assert anonymous.status_code == 403 and "access-control-allow-origin" not in anonymous.headers
    # Even a signed URL (a page holding one) gets no CORS header, so a foreign page cannot read the body.
    presigned = _signed_client(infra, "assets").presigned_get_object(bucket, key)
    signed = httpx.get(presigned, headers=FOREIGN)
    assert signed.status_code == 200 and signed.content == b"tenant data"
    assert "access-control-allow-origin" not in signed.headers


async def test_postgres_refuses_a_login_without_the_password(infra: Infra) -> None:
    for role in (PG_SUPERUSER, "publication"):
        with pytest.raises((asyncpg.InvalidPasswordError, asyncpg.InvalidAuthorizationSpecificationError)):
            await asyncpg.connect(f"postgresql://{role}@{infra.pg_host}:{infra.pg_port}/postgres", password="")
        with pytest.raises(asyncpg.InvalidPasswordError):
            await asyncpg.connect(f"postgresql://{role}:guessed@{infra.pg_host}:{infra.pg_port}/postgres")


async def test_one_services_role_cannot_connect_to_anothers_database(infra: Infra) -> None:
    name = f"publication_{uuid.uuid4().hex[:10]}"
    own = Database(infra.dsn(name, role="publication"))
    await own.connect()
    try:
        for other in ("artifact", "workspace", "tester"):
            with pytest.raises(asyncpg.InsufficientPrivilegeError, match="permission denied for database"):
                await asyncpg.connect(infra.dsn(name, role=other))
    finally:
        await own.close()


async def test_a_home_made_with_trust_is_moved_to_passwords_and_keeps_its_data(
    dossier_homes: Callable[[str], Path],
) -> None:
    """A cluster from before roles (auth=trust, tables owned by the superuser), on its next start."""
    home = dossier_homes("trust-home")
    place = pg_folders(home)
    initdb = [place.program("initdb"), "-D", place.data_arg, "--auth=trust", "--encoding=UTF8", "-U", PG_SUPERUSER]
    pg_run(place.command(initdb))
    port = free_port()
    argv = place.command(postgres_argv(place, port))
    old = Child("old-postgres", argv, {"LC_ALL": "C.UTF-8"}, home / "old.log", stop_signal=signal.SIGINT)
    old.start()
    try:
        wait_until(lambda: port_open(port), timeout=60, what="old postgres", alive=old.alive)
        admin = await _connect_when_ready(f"postgresql://{PG_SUPERUSER}@127.0.0.1:{port}/postgres")
        await admin.execute('CREATE DATABASE "workspace"')
        await admin.close()
        inside = await asyncpg.connect(f"postgresql://{PG_SUPERUSER}@127.0.0.1:{port}/workspace")
        await inside.execute(
            "CREATE TABLE kept (id bigserial PRIMARY KEY, v text); INSERT INTO kept (v) VALUES ('old')"
        )
        await inside.close()
    finally:
        old.stop()

    new = postgres_child(home, port, {"LC_ALL": "C.UTF-8"}, "super-secret")
    new.start()
    try:
        wait_until(lambda: port_open(port), timeout=60, what="postgres", alive=new.alive)
        rules = [
            line.split() for line in (place.data / "pg_hba.conf").read_text().splitlines() if line[:1] not in ("", "#")
        ]
        assert rules and all(rule[-1] == "scram-sha-256" for rule in rules)
        admin_dsn = postgres_dsn(port, "postgres", PG_SUPERUSER, "super-secret")
        await (await _connect_when_ready(admin_dsn)).close()
        with pytest.raises(asyncpg.InvalidPasswordError):
            await asyncpg.connect(f"postgresql://{PG_SUPERUSER}@127.0.0.1:{port}/postgres", password="")
        await provision_roles(admin_dsn, {"workspace": "ws-secret"})
        await provision_database(admin_dsn, "workspace", owner="workspace")
        conn = await asyncpg.connect(postgres_dsn(port, "workspace", "workspace", "ws-secret"))
        try:
            assert await conn.fetchval("SELECT v FROM kept") == "old"
            await conn.execute("INSERT INTO kept (v) VALUES ('new')")
        finally:
            await conn.close()
    finally:
        new.stop()


async def _connect_when_ready(dsn: str) -> asyncpg.Connection:
    # Postgres accepts TCP a moment before it accepts logins.
    for _ in range(600):
        try:
            return await asyncpg.connect(dsn)
        except asyncpg.CannotConnectNowError:
            await asyncio.sleep(0.05)
    raise AssertionError("postgres never accepted a login")


def test_each_home_runs_postgres_as_a_user_of_its_own(dossier_homes: Callable[[str], Path]) -> None:
    """As root: a Postgres that runs code reaches its own cluster only, not another home's (0700, another
    owner); a cluster made under another user (as older versions ran every home's) becomes this home's."""
    first, second = pg_folders(dossier_homes("home-a")), pg_folders(dossier_homes("home-b"))
    if os.geteuid() != 0:
        assert first.user is None and second.user is None  # Postgres runs as the one who started it
        return
    assert first.user and second.user and first.user != second.user
    for place in (first, second):
        entry = pwd.getpwnam(place.user)  # type: ignore[arg-type]
        assert entry.pw_uid != 0 and entry.pw_shell.endswith("nologin")
        owned = place.data.stat()
        assert (owned.st_uid, stat.S_IMODE(owned.st_mode)) == (entry.pw_uid, 0o700)
    # An older home: its data under another user (the first home's here), a file inside it too.
    (second.data / "PG_VERSION").write_text("18\n")
    old = pwd.getpwnam(first.user)  # type: ignore[arg-type]
    for path in (second.data, second.data / "PG_VERSION"):
        os.chown(path, old.pw_uid, old.pw_gid)
    again = pg_folders(second.data.parent)
    mine = pwd.getpwnam(again.user).pw_uid  # type: ignore[arg-type]
    assert again.user == second.user
    assert {p.stat().st_uid for p in (again.data, again.data / "PG_VERSION")} == {mine}
