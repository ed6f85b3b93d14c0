"""Real NATS, PostgreSQL and S3 for tests: containers when a Docker engine answers, else local processes.

Both paths hand out the same `Infra` value, so every fixture above it is the same.
"""

from __future__ import annotations

import asyncio
import secrets
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from shared.infra import nats_child, postgres_child, postgres_dsn, s3_child
from shared.procs import Child, free_port, port_open, wait_until


@dataclass
class Infra:
    nats_url: str
    pg_host: str
    pg_port: int
    pg_user: str
    s3_endpoint: str
    s3_access_key: str
    s3_secret_key: str
    bus_secret: str = field(default_factory=lambda: secrets.token_urlsafe(32))

    def dsn(self, database: str) -> str:
        return f"postgresql://{self.pg_user}@{self.pg_host}:{self.pg_port}/{database}"

    def settings_env(self, service: str, **extra: str) -> dict[str, str]:
        """Environment for one service under test, with a database of its own."""
        env = {
            "DOSSIER_NATS_URL": self.nats_url,
            "DOSSIER_DATABASE_URL": self.dsn(f"{service}_{uuid.uuid4().hex[:10]}"),
            "DOSSIER_S3_ENDPOINT": self.s3_endpoint,
            "DOSSIER_S3_ACCESS_KEY": self.s3_access_key,
            "DOSSIER_S3_SECRET_KEY": self.s3_secret_key,
            "DOSSIER_S3_BUCKET": f"test-{uuid.uuid4().hex[:12]}",
            "DOSSIER_BUS_SECRET": self.bus_secret,
        }
        env.update(extra)
        return env


def docker_available() -> bool:
    try:
        import docker

        docker.from_env().ping()
    except Exception:
        return False
    return True


@contextmanager
def local_infra(home: Path) -> Iterator[Infra]:
    nats_port, pg_port, s3_port = free_port(), free_port(), free_port()
    children: list[tuple[Child, int]] = [
        (nats_child(home, nats_port, {}), nats_port),
        (postgres_child(home, pg_port, {"LC_ALL": "C.UTF-8"}), pg_port),
        (s3_child(home, s3_port, {}), s3_port),
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
            pg_user="postgres",
            s3_endpoint=f"127.0.0.1:{s3_port}",
            s3_access_key="test",
            s3_secret_key="test-secret",
        )
        asyncio.run(_wait_for_postgres(postgres_dsn(pg_port, "postgres")))
        yield infra
    finally:
        for child, _ in reversed(children):
            child.stop()


async def _wait_for_postgres(dsn: str) -> None:
    import asyncpg

    for _ in range(300):
        try:
            conn = await asyncpg.connect(dsn)
            await conn.close()
            return
        except Exception:
            await asyncio.sleep(0.1)
    raise TimeoutError("postgres did not accept connections")


@contextmanager
def container_infra() -> Iterator[Infra]:
    from testcontainers.core.container import DockerContainer
    from testcontainers.core.waiting_utils import wait_for_logs
    from testcontainers.minio import MinioContainer
    from testcontainers.postgres import PostgresContainer

    nats = DockerContainer("nats:2.10").with_command("-js").with_exposed_ports(4222)
    pg = PostgresContainer("postgres:16", username="postgres", password="postgres")
    minio = MinioContainer()
    with nats, pg, minio:
        wait_for_logs(nats, "Server is ready")
        minio_cfg = minio.get_config()
        yield Infra(
            nats_url=f"nats://{nats.get_container_host_ip()}:{nats.get_exposed_port(4222)}",
            pg_host=pg.get_container_host_ip(),
            pg_port=int(pg.get_exposed_port(5432)),
            pg_user="postgres:postgres",
            s3_endpoint=minio_cfg["endpoint"],
            s3_access_key=minio_cfg["access_key"],
            s3_secret_key=minio_cfg["secret_key"],
        )
