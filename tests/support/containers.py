"""NATS, PostgreSQL and S3 in containers for the service tests, when a Docker engine and the images are there.

The images are the ones docker-compose.yml uses, chosen by the same variables (DOSSIER_NATS_IMAGE,
DOSSIER_POSTGRES_IMAGE, DOSSIER_S3_IMAGE); unset, the official images pinned here and in compose. Nothing
is pulled unless DOSSIER_TEST_PULL_IMAGES=1: where no registry is reachable a pull would fail every test,
so an image that is not already present means local processes instead, and `container_choice` says
which image was missing.
deploy/containers/build-images.sh builds drop-in images from Debian's packages and wheels.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from devstack.infra import PG_SUPERUSER
from shared.children import wait_until
from shared.contracts.common import ALL_PROCESSES
from shared.natsauth import TESTER_USER, accounts_block, server_accounts
from shared.outside import EVENTS_USER, OUTSIDE_ADMIN
from tests.support.infra import TEST_ROLES, Infra, declare_event_streams, passwords, provision, start_guard

# The defaults of docker-compose.yml's ${DOSSIER_*_IMAGE:-...}; a unit test keeps the two in step.
DEFAULT_IMAGES = {
    "DOSSIER_NATS_IMAGE": "nats:2.10.29-alpine",
    "DOSSIER_POSTGRES_IMAGE": "postgres:16.10",
    "DOSSIER_S3_IMAGE": "minio/minio:RELEASE.2025-09-07T16-13-09Z",
}


def images() -> dict[str, str]:
    return {name: os.environ.get(name) or default for name, default in DEFAULT_IMAGES.items()}


@dataclass(frozen=True)
class Choice:
    containers: bool
    reason: str


@functools.cache
def container_choice() -> Choice:
    """Containers only when the engine answers and every image is present. Missing images are pulled
    only with DOSSIER_TEST_PULL_IMAGES=1 (where a registry is reachable): elsewhere a pull fails slowly."""
    try:
        import docker

        client = docker.from_env(timeout=5)
        client.ping()
    except Exception as exc:
        return Choice(False, f"no Docker engine answers ({type(exc).__name__})")
    try:
        missing = [image for image in images().values() if not _present(client, image)]
        if missing and os.environ.get("DOSSIER_TEST_PULL_IMAGES") == "1":
            for image in missing:
                with contextlib.suppress(Exception):
                    client.images.pull(image)
            missing = [image for image in missing if not _present(client, image)]
    finally:
        client.close()
    if missing:
        return Choice(False, f"image(s) not present: {', '.join(missing)} (make images; deploy/README.md)")
    return Choice(True, "a Docker engine answers and these images are present: " + ", ".join(images().values()))


def _present(client: object, image: str) -> bool:
    import docker.errors

    try:
        client.images.get(image)  # type: ignore[attr-defined]
    except docker.errors.ImageNotFound:
        return False
    return True


@contextmanager
def container_infra(home: Path) -> Iterator[Infra]:
    """`home` keeps the consumer guard's log (the guard runs as a local process next to the containers)."""
    from testcontainers.community.postgres import PostgresContainer
    from testcontainers.core.config import testcontainers_config
    from testcontainers.core.container import DockerContainer
    from testcontainers.core.wait_strategies import LogMessageWaitStrategy

    # Ryuk removes containers a crashed session leaves behind; its image cannot be pulled here either.
    # The `with` below removes ours whenever the session ends normally or with a failure.
    if os.environ.get("TESTCONTAINERS_RYUK_DISABLED") is None:
        testcontainers_config.ryuk_disabled = not _ryuk_present(testcontainers_config.ryuk_image)
    chosen = images()
    nats_passwords = passwords([*ALL_PROCESSES, EVENTS_USER, OUTSIDE_ADMIN, TESTER_USER])
    pg_passwords = passwords([PG_SUPERUSER, *TEST_ROLES])
    accounts = server_accounts(nats_passwords, durables=None, with_tester=True)
    conf = 'jetstream { store_dir: "/data" }\nmax_payload: 8MB\n' + accounts_block(accounts)
    # Copied in rather than mounted: the image's own user reads it, whatever the host's folder modes.
    nats_c = DockerContainer(chosen["DOSSIER_NATS_IMAGE"]).with_command("-c /etc/dossier/nats.conf")
    nats_c = nats_c.with_exposed_ports(4222).with_copy_into_container(conf.encode(), "/etc/dossier/nats.conf")
    nats_c = nats_c.waiting_for(LogMessageWaitStrategy("Server is ready"))
    pg = PostgresContainer(chosen["DOSSIER_POSTGRES_IMAGE"], username=PG_SUPERUSER, password=pg_passwords[PG_SUPERUSER])
    # A throw-away server, like local_infra's: no fsync, so commits and the shutdown never wait on the disk.
    pg = pg.with_command("postgres -c fsync=off -c synchronous_commit=off -c full_page_writes=off")
    root = ("dossier-root", passwords(["root"])["root"])
    # Each process its own key, held to its own prefixes (shared/objectkeys.py) as in local_infra; in any
    # bucket, since every service instance under test makes one of its own.
    s3_secrets = passwords(ALL_PROCESSES)
    # MinIO knows no such keys (its users come from `mc admin`, deploy/minio): there, the root key for all.
    own_server = not chosen["DOSSIER_S3_IMAGE"].startswith("minio/")
    s3 = DockerContainer(chosen["DOSSIER_S3_IMAGE"]).with_command("server /data").with_exposed_ports(9000)
    s3 = s3.with_envs(
        MINIO_ROOT_USER=root[0],
        MINIO_ROOT_PASSWORD=root[1],
        S3_BUCKET="*",
        **{f"S3_{name.upper()}_SECRET": secret for name, secret in s3_secrets.items()},
    )
    with nats_c, pg, s3:
        s3_endpoint = f"{s3.get_container_host_ip()}:{s3.get_exposed_port(9000)}"
        wait_until(lambda: _s3_answers(s3_endpoint, root), timeout=60, what="the S3 container")
        pg_host, pg_port = pg.get_container_host_ip(), int(pg.get_exposed_port(5432))
        admin = f"postgresql://{PG_SUPERUSER}:{pg_passwords[PG_SUPERUSER]}@{pg_host}:{pg_port}/postgres"
        asyncio.run(provision(admin, {r: pg_passwords[r] for r in TEST_ROLES}))
        infra = Infra(
            nats_url=f"nats://{nats_c.get_container_host_ip()}:{nats_c.get_exposed_port(4222)}",
            pg_host=pg_host,
            pg_port=pg_port,
            s3_endpoint=s3_endpoint,
            nats_passwords=nats_passwords,
            pg_passwords=pg_passwords,
            s3_keys=(
                {name: (f"dossier-{name}", secret) for name, secret in s3_secrets.items()}
                if own_server
                else dict.fromkeys(ALL_PROCESSES, root)
            )
            | {TESTER_USER: root},
        )
        asyncio.run(declare_event_streams(infra))
        guard = start_guard(home, infra)
        try:
            yield infra
        finally:
            guard.stop()


def _ryuk_present(image: str) -> bool:
    import docker

    client = docker.from_env(timeout=5)
    try:
        return _present(client, image)
    finally:
        client.close()


def _s3_answers(endpoint: str, key: tuple[str, str]) -> bool:
    """A signed request succeeds: MinIO and the local S3 image alike (neither answers unsigned ones)."""
    import urllib3
    from minio import Minio

    http = urllib3.PoolManager(timeout=2, retries=False)
    try:
        Minio(endpoint, access_key=key[0], secret_key=key[1], secure=False, http_client=http).list_buckets()
    except Exception:
        return False
    return True
