"""Real NATS, PostgreSQL and S3 for tests: containers when a Docker engine and the images are there
(tests/support/containers.py), else local processes.

Both paths hand out the same `Infra` value, so every fixture above it is the same. The servers are as
locked down as the stack's: every service under test gets its own restricted credentials (NATS user,
PostgreSQL role, S3 key); test code that plays a caller uses the `tester` user and role, broad but
never stream administration or a superuser.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nats

from devstack.infra import (
    PG_SUPERUSER,
    guard_child,
    nats_child,
    postgres_child,
    postgres_dsn,
    provision_roles,
    s3_child,
)
from devstack.procs import free_port, port_open
from shared.blobs import Blobs
from shared.children import Child, wait_until
from shared.consumerguard import guard_answers
from shared.contracts.common import ALL_PROCESSES
from shared.natsauth import TESTER_USER, inbox_prefix, server_accounts
from shared.objectkeys import key_entry
from shared.outside import EVENTS_USER, OUTSIDE_ADMIN, declare_outside_stream
from shared.proof import SIGNERS, load_private_key, new_private_key, public_key_text, public_keys_text
from shared.secretfiles import new_password, private_folder
from shared.settings import CommonSettings
from shared.streams import declare_streams
from tests.support.callers import CallerSigner

TEST_ROLES = (*ALL_PROCESSES, TESTER_USER)


@dataclass
class Infra:
    nats_url: str
    pg_host: str
    pg_port: int
    s3_endpoint: str
    # NATS user → password; PostgreSQL role → password; S3 access key per process → secret.
    nats_passwords: dict[str, str]
    pg_passwords: dict[str, str]
    s3_keys: dict[str, tuple[str, str]]
    # Each signer's Ed25519 key (shared/proof.py): a service under test gets its own, and every public key.
    proof_keys: dict[str, str] = field(default_factory=lambda: {name: new_private_key() for name in SIGNERS})

    @property
    def public_keys(self) -> str:
        return public_keys_text({name: public_key_text(key) for name, key in self.proof_keys.items()})

    def signer(self) -> CallerSigner:
        """Test code plays every caller: it signs each call as the process that makes that call."""
        return CallerSigner({name: load_private_key(key) for name, key in self.proof_keys.items()})

    def dsn(self, database: str, role: str = TESTER_USER) -> str:
        return f"postgresql://{role}:{self.pg_passwords[role]}@{self.pg_host}:{self.pg_port}/{database}"

    def nats_options(self, user: str = TESTER_USER) -> dict[str, Any]:
        return {"user": user, "password": self.nats_passwords[user], "inbox_prefix": inbox_prefix(user)}

    async def connect(self, user: str = TESTER_USER, **options: Any) -> nats.NATS:
        return await nats.connect(self.nats_url, **(self.nats_options(user) | options))

    def blobs_as(self, process: str, bucket: str) -> Blobs:
        """The object store as `process`'s key sees it (`tester`: every object, for setting up a test)."""
        access_key, secret_key = self.s3_keys[process]
        settings = CommonSettings(
            s3_endpoint=self.s3_endpoint, s3_access_key=access_key, s3_secret_key=secret_key, s3_bucket=bucket
        )
        return Blobs(settings)

    def settings_env(self, service: str, **extra: str) -> dict[str, str]:
        """Environment for one service under test, with a database of its own and its own credentials."""
        access_key, secret_key = self.s3_keys[service]
        env = {
            "DOSSIER_NATS_URL": self.nats_url,
            "DOSSIER_NATS_USER": service,
            "DOSSIER_NATS_PASSWORD": self.nats_passwords[service],
            "DOSSIER_DATABASE_URL": self.dsn(f"{service}_{uuid.uuid4().hex[:10]}", role=service),
            "DOSSIER_S3_ENDPOINT": self.s3_endpoint,
            "DOSSIER_S3_ACCESS_KEY": access_key,
            "DOSSIER_S3_SECRET_KEY": secret_key,
            "DOSSIER_S3_BUCKET": f"test-{uuid.uuid4().hex[:12]}",
            "DOSSIER_PROOF_PUBLIC_KEYS": self.public_keys,
        }
        if service in self.proof_keys:
            env["DOSSIER_PROOF_KEY"] = self.proof_keys[service]
        env.update(extra)
        return env


def passwords(names: Any) -> dict[str, str]:
    return {name: new_password() for name in names}


@contextmanager
def local_infra(home: Path) -> Iterator[Infra]:
    private_folder(home)
    nats_port, pg_port, s3_port = free_port(), free_port(), free_port()
    nats_passwords = passwords([*ALL_PROCESSES, EVENTS_USER, OUTSIDE_ADMIN, TESTER_USER])
    pg_passwords = passwords([PG_SUPERUSER, *TEST_ROLES])
    s3_keys = {name: (f"test-{name}", new_password()) for name in (*ALL_PROCESSES, TESTER_USER)}
    # Tests give every instance its own durable consumer names, so those are granted by filter, not name.
    accounts = server_accounts(nats_passwords, durables=None, with_tester=True)
    # Tests give every service instance a bucket of its own; in it, each key has its process's rules.
    keys = {key: key_entry(name, secret, ["*"]) for name, (key, secret) in s3_keys.items() if name != TESTER_USER}
    keys[s3_keys[TESTER_USER][0]] = {"secret": s3_keys[TESTER_USER][1], "buckets": ["*"]}
    children: list[tuple[Child, int]] = [
        (nats_child(home, nats_port, {}, accounts), nats_port),
        (postgres_child(home, pg_port, {"LC_ALL": "C.UTF-8"}, pg_passwords[PG_SUPERUSER], durable=False), pg_port),
        (s3_child(home, s3_port, {}, keys), s3_port),
    ]
    try:
        for child, _ in children:
            child.start()
        for child, port in children:
            wait_until(lambda p=port: port_open(p), timeout=60, what=child.name, alive=child.alive)  # type: ignore[misc]
        infra = Infra(
            nats_url=f"nats://127.0.0.1:{nats_port}",
            pg_host="127.0.0.1",
            pg_port=pg_port,
            s3_endpoint=f"127.0.0.1:{s3_port}",
            nats_passwords=nats_passwords,
            pg_passwords=pg_passwords,
            s3_keys=s3_keys,
        )
        admin = postgres_dsn(pg_port, "postgres", PG_SUPERUSER, pg_passwords[PG_SUPERUSER])
        asyncio.run(provision(admin, {r: pg_passwords[r] for r in TEST_ROLES}))
        asyncio.run(declare_event_streams(infra))
        guard = start_guard(home, infra)
        children.append((guard, 0))
        yield infra
    finally:
        for child, _ in reversed(children):
            child.stop()


async def provision(admin_dsn: str, roles: dict[str, str]) -> None:
    # Postgres accepts TCP a moment before it accepts logins.
    for attempt in range(300):
        try:
            await provision_roles(admin_dsn, roles, create_db=True)
            return
        except Exception:
            if attempt == 299:
                raise
            await asyncio.sleep(0.1)


async def declare_event_streams(infra: Infra) -> None:
    """The event stream, then the outside subscribers' mirror of it (shared.outside), as the stack does."""
    await declare_streams([infra.nats_url], infra.nats_options(), 1)
    await declare_outside_stream(
        [infra.nats_url], {"user": OUTSIDE_ADMIN, "password": infra.nats_passwords[OUTSIDE_ADMIN]}, 1
    )


def start_guard(home: Path, infra: Infra) -> Child:
    """The outside subscribers' consumer guard (shared.consumerguard), answering before tests begin."""
    guard = guard_child(home, [infra.nats_url], infra.nats_passwords[OUTSIDE_ADMIN], 1, {})
    guard.start()
    password = infra.nats_passwords[EVENTS_USER]
    wait_until(
        lambda: asyncio.run(guard_answers([infra.nats_url], password)), timeout=60, what="guard", alive=guard.alive
    )
    return guard


def events_descriptor(infra: Infra) -> dict[str, Any]:
    return {"servers": [infra.nats_url], "user": EVENTS_USER, "password": infra.nats_passwords[EVENTS_USER]}
