"""`make up`: the whole Dossier stack in the foreground, supervised.

It starts NATS, PostgreSQL and the S3 server, then the gateway and every service, restarts whatever
dies, prints the gateway URL and the admin token once /v1/health is green, and stops everything in
order on Ctrl-C or SIGTERM. All state lives under $DOSSIER_HOME and survives a restart.
"""

from __future__ import annotations

import asyncio
import fcntl
import hashlib
import json
import os
import secrets
import signal
import socket
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from functools import partial
from pathlib import Path

import asyncpg

from devstack.infra import (
    PG_SUPERUSER,
    guard_child,
    lock_maintenance_databases,
    nats_child,
    nats_node_child,
    postgres_child,
    postgres_dsn,
    provision_database,
    provision_roles,
    s3_child,
)
from devstack.logfiles import LogRotation
from devstack.natsports import nats_client_ports
from devstack.procs import can_listen, free_port, port_open, reserve
from devstack.scale import STREAM_DECLARER, count_setting, process_name
from devstack.scrape import metrics_urls, write_targets
from shared.children import Child, service_of, wait_until, worker_name, write_pid
from shared.contracts.common import ALL_PROCESSES, SERVICES
from shared.health import read_verdict, reports_ok
from shared.metrics import MULTIPROC_ENV, fresh_metrics_dir, worker_exited
from shared.natsauth import connect_options, server_accounts, user_passwords, workspace_durables
from shared.objectkeys import key_entry
from shared.outside import EVENTS_USER, OUTSIDE_ADMIN, declare_outside_stream, max_consumers, write_events_descriptor
from shared.proof import SIGNERS, new_private_key, public_key_text, public_keys_text
from shared.restarts import RESTARTS_FILE, RestartBook, next_delay
from shared.secretfiles import private_folder, secret_table, secret_value
from shared.settings import MAX_GATEWAY_WORKERS, CommonSettings, available_cores
from shared.streams import declare_streams

# Secrets a process gets only when it uses them (see service_env), never inherited wholesale.
SECRET_VARIABLES = (
    "DOSSIER_ADMIN_TOKEN",
    "DOSSIER_PROOF_KEY",
    "DOSSIER_OPENAI_API_KEY",
    "DOSSIER_S3_ACCESS_KEY",
    "DOSSIER_S3_SECRET_KEY",
    "DOSSIER_NATS_USER",
    "DOSSIER_NATS_PASSWORD",
    "DOSSIER_DATABASE_URL",
)
# The processes that read or write object bytes; the others get no object-store key.
OBJECT_USERS = ("gateway", "runhost", "artifact", "assets")
# The first wait before restarting a process that died; it doubles while the process keeps dying (shared/restarts.py).
RESTART_DELAY = 0.5
POLL_SECONDS = 0.2
HEALTH_TIMEOUT = 90.0
HEALTH_CHECK_SECONDS = 1.0
# A service whose own health report stays bad this long, while NATS answers, is restarted.
UNHEALTHY_RESTART_SECONDS = 60.0


def nats_answers(port: int, timeout: float = 1.0) -> bool:
    """The server greets every new connection with INFO; a stopped or wedged server does not."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as conn:
            conn.settimeout(timeout)
            return conn.recv(4).startswith(b"INFO")
    except OSError:
        return False


def s3_access_key(process: str) -> str:
    return f"dossier-{process}"


def gateway_of(process: str) -> str:
    """The gateway process (replica) a worker serves with: `gateway.2-w3` → `gateway.2`."""
    return process.partition("-w")[0]


def workers_setting(env: dict[str, str]) -> int:
    raw = env.get("DOSSIER_GATEWAY_WORKERS")
    if not raw:
        return available_cores()
    if not raw.isdigit() or not 1 <= int(raw) <= MAX_GATEWAY_WORKERS:
        raise SystemExit(f"DOSSIER_GATEWAY_WORKERS={raw!r}: expected a number from 1 to {MAX_GATEWAY_WORKERS}")
    return int(raw)


class Stack:
    def __init__(self, env: dict[str, str] | None = None):
        self.env = dict(os.environ if env is None else env)
        self.home = Path(self.env.get("DOSSIER_HOME") or ".dossier").resolve()
        # Everything under it is either a secret or a tenant's data: the owner's alone, and so is every
        # file the stack and its children create (logs, pids, objects).
        os.umask(0o077)
        private_folder(self.home)
        self.pid_dir = self.home / "pids"
        self.log_dir = self.home / "logs"
        # One file per service, shared by its processes, rotated by size here (devstack/logfiles.py).
        self.log_rotation = LogRotation(self.log_dir, self.env, {f"{name}.log" for name in ALL_PROCESSES})
        self.http_port = int(self.env.get("DOSSIER_HTTP_PORT") or 8080)
        # Printed once, by the first start that comes up after it was made (one that fails before leaves it
        # unshown); a later start says where it is kept (logs and terminals keep lines).
        self.token_unshown = self.home / "admin-token.unshown"
        if not self.env.get("DOSSIER_ADMIN_TOKEN") and not (self.home / "admin-token").exists():
            self.token_unshown.touch(mode=0o600)
        self.admin_token = secret_value(
            self.home / "admin-token",
            self.env.get("DOSSIER_ADMIN_TOKEN"),
            lambda: f"adm_{secrets.token_urlsafe(32)}",
        )
        # The scrapers' bearer token for every process's /metrics, the gateway's included.
        self.metrics_token = secret_value(self.home / "metrics-token", None, lambda: secrets.token_urlsafe(32))
        # Proof of caller: each signer's Ed25519 key, generated once; every process gets the public halves.
        self.proof_keys = {
            name: secret_value(self.home / "proof" / f"{name}.key", None, new_private_key) for name in SIGNERS
        }
        self.public_keys = public_keys_text({name: public_key_text(key) for name, key in self.proof_keys.items()})
        # The shared HMAC grant secret of earlier versions: no process uses it any more.
        (self.home / "bus-secret").unlink(missing_ok=True)
        self.nats_passwords = user_passwords(self.home)
        self.s3_secrets = secret_table(self.home / "s3-secrets.json", OBJECT_USERS)
        self.pg_passwords = secret_table(self.home / "pg-passwords.json", [PG_SUPERUSER, *ALL_PROCESSES])
        self.children: dict[str, Child] = {}
        # a JetStream cluster of 1 or 3 nodes, and n processes of every service (devstack.scale).
        self.nats_nodes = count_setting(self.env, "DOSSIER_NATS_CLUSTER", (1, 3))
        self.replicas = count_setting(self.env, "DOSSIER_REPLICAS", (1, 2, 3, 4))
        # How many consumers outside subscribers may hold on the events mirror (shared.outside).
        self.outside_max_consumers = max_consumers(self.env)
        # (service, process name) of every process the stack runs, replica 1 first.
        # Gateway processes sharing each gateway port (services/gateway/transport/workers.py).
        self.gateway_workers = workers_setting(self.env)
        self.processes = [
            (n, worker_name(process_name(n, i), w))
            for n in ALL_PROCESSES
            for i in range(1, self.replicas + 1)
            for w in range(1, (self.gateway_workers if n == "gateway" else 1) + 1)
        ]
        self.gateway_ports = {process_name("gateway", i): self.http_port + i - 1 for i in range(1, self.replicas + 1)}
        # The workers of a gateway port share a folder: their metric files, which /metrics on any of them
        # reads, and their per-token rate buckets (services/gateway/transport/workers.py).
        self.gateway_dirs = {name: self.home / "gateway" / name for name in self.gateway_ports}
        self.gateway_processes = {process for name, process in self.processes if name == "gateway"}
        # Each service process serves Prometheus metrics on a port of its own, chosen free (choose_ports; the
        # gateway's are on its HTTP port), and listed in stack.json and prometheus-targets.json (devstack/scrape.py).
        self.metrics_ports: dict[str, int] = {}
        self.stopping = False
        self._lock_fd: int | None = None
        self.health_dir = self.home / "health"
        # Present once the servers answer, the databases are provisioned and the streams declared.
        self.infra_ready = self.home / "infra-ready"
        # Fault tests hold NATS down for minutes; in any real use it comes back as fast as the rest.
        self.restart_delay = float(self.env.get("DOSSIER_RESTART_DELAY") or RESTART_DELAY)
        self.nats_restart_delay = float(self.env.get("DOSSIER_NATS_RESTART_DELAY") or self.restart_delay)
        self.unhealthy_grace = float(self.env.get("DOSSIER_UNHEALTHY_RESTART_SECONDS") or UNHEALTHY_RESTART_SECONDS)
        self._died_at: dict[str, float] = {}
        # The wait before each dead process's next start, and why the supervisor killed one itself.
        self._delays: dict[str, float] = {}
        self._killed_for: dict[str, str] = {}
        self.restarts: RestartBook | None = None
        self._nats_up_since: float | None = None
        self._health_checked = 0.0
        # `DOSSIER_START_TIMINGS=1` prints when each phase of the start ended (bench/start.py reads them).
        self._timings = bool(self.env.get("DOSSIER_START_TIMINGS"))
        self._began = time.monotonic()

    def _phase(self, name: str) -> None:
        if self._timings:
            print(f"dossier: start: {name} at {time.monotonic() - self._began:.2f} s", file=sys.stderr, flush=True)

    # -- start -------------------------------------------------------------------------------------

    def _lock(self) -> None:
        fd = os.open(self.home / "stack.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise SystemExit(f"another Dossier stack is already running on {self.home}") from None
        self._lock_fd = fd

    def _infra_env(self) -> dict[str, str]:
        return {k: v for k, v in self.env.items() if not k.startswith("DOSSIER_")} | {"LC_ALL": "C.UTF-8"}

    def _launch(self, child: Child, before_named: Callable[[int], None] | None = None) -> None:
        """Start `child`; its pid file names it last, after `before_named(pid)` (a restart's record), so
        whoever sees the new pid also finds what was recorded of its start."""
        pid = child.start()
        if before_named is not None:
            before_named(pid)
        write_pid(self.pid_dir, child.name, pid)
        self.children[child.name] = child

    def _check_http_ports(self) -> None:
        """The gateway workers share their port (SO_REUSEPORT); a server already on it, even one that would
        let them join it, must stop the start rather than take a share of the requests."""
        taken = [str(port) for port in self.gateway_ports.values() if not can_listen(port)]
        if taken:
            raise SystemExit(
                f"gateway port already in use: {', '.join(taken)}; stop whatever holds it or set DOSSIER_HTTP_PORT"
            )

    def choose_ports(self) -> None:
        """Every server's port, before any process starts: the services are started with them."""
        self._check_http_ports()
        # The ports set for this stack first, so that no other server of it is given one of them.
        set_ports = {name: int(self.env[name]) for name in ("DOSSIER_PG_PORT", "DOSSIER_S3_PORT") if self.env.get(name)}
        reserve([*self.gateway_ports.values(), *set_ports.values()])
        # Kept in the home across restarts, so outside subscribers' nats/events.json stays valid.
        client_ports = nats_client_ports(self.home, self.env, self.nats_nodes)
        self.nats_port = client_ports[0]
        self.pg_port, self.s3_port = (
            set_ports[name] if name in set_ports else free_port() for name in ("DOSSIER_PG_PORT", "DOSSIER_S3_PORT")
        )
        self.metrics_ports = {proc: free_port() for service, proc in self.processes if service != "gateway"}
        # A cluster's nodes: (client port, route port) each, the first node on DOSSIER_NATS_PORT.
        self.nats_node_ports = [(self.nats_port, 0)]
        if self.nats_nodes > 1:
            self.nats_node_ports = [(client, free_port()) for client in client_ports]
        self.nats_ports = [client for client, _ in self.nats_node_ports]

    def start_infra(self) -> None:
        base = self._infra_env()
        accounts = server_accounts(
            self.nats_passwords, durables=workspace_durables(), outside_max_consumers=self.outside_max_consumers
        )
        # Each service's key may use the stack's bucket only, and there only its own objects.
        keys = {s3_access_key(n): key_entry(n, self.s3_secrets[n], ["dossier"]) for n in OBJECT_USERS}
        infra = [(nats_child(self.home, self.nats_port, base, accounts), self.nats_port)]
        if self.nats_nodes > 1:
            route_password = secret_value(self.home / "nats" / "route-password", None, secrets.token_urlsafe)
            ports = self.nats_node_ports
            infra = [
                (nats_node_child(self.home, node, ports, base, accounts, route_password), ports[node - 1][0])
                for node in range(1, self.nats_nodes + 1)
            ]
        infra += [
            (postgres_child(self.home, self.pg_port, base, self.pg_passwords[PG_SUPERUSER]), self.pg_port),
            (s3_child(self.home, self.s3_port, base, keys), self.s3_port),
        ]
        for child, _ in infra:
            self._launch(child)
        self._phase("infrastructure launched")
        self._infra = infra

    def prepare_infra(self) -> None:
        """Waits for the servers, provisions the databases and declares the streams, then opens the gate that
        the services, started meanwhile, wait at after their imports (DOSSIER_INFRA_READY_FILE)."""
        base = self._infra_env()
        for child, port in self._infra:
            wait_until(partial(port_open, port), timeout=60, what=child.name, alive=child.alive)
        self._phase("infrastructure listening")
        asyncio.run(self._create_databases())
        self._phase("databases provisioned")
        # The streams exist before any service starts, so the outside mirror finds its source at once
        # (a mirror declared before its source retries on a backoff of seconds).
        declarer = CommonSettings(nats_user=STREAM_DECLARER, nats_password=self.nats_passwords[STREAM_DECLARER])
        asyncio.run(declare_streams(self.nats_urls, connect_options(declarer), self.nats_nodes))
        outside = {"user": OUTSIDE_ADMIN, "password": self.nats_passwords[OUTSIDE_ADMIN]}
        asyncio.run(declare_outside_stream(self.nats_urls, outside, self.nats_nodes))
        # Outside subscribers' consumers are made only through the guard (shared.consumerguard).
        self._launch(guard_child(self.home, self.nats_urls, outside["password"], self.nats_nodes, base))
        write_events_descriptor(self.home, self.nats_urls, self.nats_passwords[EVENTS_USER])
        self._phase("streams declared")
        self.infra_ready.touch(mode=0o600)

    @property
    def nats_url(self) -> str:
        return f"nats://127.0.0.1:{self.nats_port}"

    @property
    def nats_urls(self) -> list[str]:
        return [f"nats://127.0.0.1:{port}" for port in self.nats_ports]

    async def _create_databases(self) -> None:
        admin = postgres_dsn(self.pg_port, "postgres", PG_SUPERUSER, self.pg_passwords[PG_SUPERUSER])
        # Postgres accepts TCP a moment before it accepts logins; retry until the deadline.
        deadline = time.monotonic() + 30
        while True:
            try:
                conn = await asyncpg.connect(admin)
                break
            except Exception as exc:
                if not self.children["postgres"].alive():
                    # Its port answered, but not for it: another server had it first (see its log).
                    pg_log = self.home / "logs" / "postgres.log"
                    raise RuntimeError(f"postgres exited while starting; see {pg_log}") from exc
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.1)
        try:
            cluster = await conn.fetchval("SELECT system_identifier FROM pg_control_system()")
        finally:
            await conn.close()
        # The roles, their passwords, the databases and their owners as the last provisioning of this very
        # cluster left them: nothing to do (it was a third of a start's wait for its servers).
        wanted = json.dumps([str(cluster), ALL_PROCESSES, self.pg_passwords], sort_keys=True).encode()
        state = hashlib.sha256(wanted).hexdigest()
        marker = self.home / "postgres-provisioned"
        if marker.exists() and marker.read_text() == state:
            return
        await provision_roles(admin, {name: self.pg_passwords[name] for name in ALL_PROCESSES})
        # Each database on its own connections, all at once: one after another was half a second of start.
        await asyncio.gather(*(provision_database(admin, name, owner=name) for name in ALL_PROCESSES))
        await lock_maintenance_databases(admin)
        marker.write_text(state)

    def service_env(self, name: str, process: str | None = None) -> dict[str, str]:
        """The process's own credentials, and only the secrets it uses; every replica of a service the same."""
        process = process or name
        env = {k: v for k, v in self.env.items() if k not in SECRET_VARIABLES}
        env.update(
            {
                "DOSSIER_HOME": str(self.home),
                "DOSSIER_NATS_URL": ",".join(self.nats_urls),
                "DOSSIER_NATS_USER": name,
                "DOSSIER_NATS_PASSWORD": self.nats_passwords[name],
                "DOSSIER_DATABASE_URL": postgres_dsn(self.pg_port, name, name, self.pg_passwords[name]),
                "DOSSIER_S3_ENDPOINT": f"127.0.0.1:{self.s3_port}",
                "DOSSIER_HTTP_PORT": str(self.gateway_ports.get(gateway_of(process), self.http_port)),
                "DOSSIER_HEALTH_FILE": str(self.health_dir / f"{process}.json"),
                "DOSSIER_PROCESS": process,
                "DOSSIER_LOG_FILE": str(self.log_dir / f"{name}.log"),
                "DOSSIER_INFRA_READY_FILE": str(self.infra_ready),
                "DOSSIER_METRICS_TOKEN": self.metrics_token,
                "PYTHONUNBUFFERED": "1",
            }
        )
        if self.nats_nodes > 1:
            env["DOSSIER_STREAM_REPLICAS"] = str(self.nats_nodes)
        if name in OBJECT_USERS:
            env["DOSSIER_S3_ACCESS_KEY"] = s3_access_key(name)
            env["DOSSIER_S3_SECRET_KEY"] = self.s3_secrets[name]
        env["DOSSIER_PROOF_PUBLIC_KEYS"] = self.public_keys
        if name in self.proof_keys:
            env["DOSSIER_PROOF_KEY"] = self.proof_keys[name]
        if name == "gateway":
            env["DOSSIER_ADMIN_TOKEN"] = self.admin_token
            env["DOSSIER_GATEWAY_WORKERS"] = str(self.gateway_workers)
            env["DOSSIER_GATEWAY_WORKER"] = process.rpartition("-w")[2] if "-w" in process else "1"
            env["DOSSIER_RESTARTS_FILE"] = str(self.home / RESTARTS_FILE)
            if self.gateway_workers > 1:
                # What the workers of a port share (a lone worker keeps both in its memory, at less cost).
                shared = self.gateway_dirs[gateway_of(process)]
                env[MULTIPROC_ENV] = str(shared / "metrics")
                env["DOSSIER_GATEWAY_RATES_FILE"] = str(shared / "rates")
        if name == "runhost" and "DOSSIER_OPENAI_API_KEY" in self.env:
            env["DOSSIER_OPENAI_API_KEY"] = self.env["DOSSIER_OPENAI_API_KEY"]
        if process in self.metrics_ports:
            env["DOSSIER_METRICS_PORT"] = str(self.metrics_ports[process])
        return env

    def start_services(self) -> None:
        for folder in self.gateway_dirs.values() if self.gateway_workers > 1 else ():
            fresh_metrics_dir(folder / "metrics")
        for name, process in self.processes:
            argv = [sys.executable, "-m", f"services.{name}"]
            env = self.service_env(name, process)
            self._launch(Child(process, argv, env, Path(env["DOSSIER_LOG_FILE"])))

    def write_state(self) -> None:
        metrics = metrics_urls(self.gateway_ports, self.metrics_ports)
        state = {
            "gateway_url": f"http://127.0.0.1:{self.http_port}",
            "gateway_urls": [f"http://127.0.0.1:{port}" for port in self.gateway_ports.values()],
            "nats_url": self.nats_url,
            "nats_urls": self.nats_urls,
            "postgres_port": self.pg_port,
            "s3_endpoint": f"127.0.0.1:{self.s3_port}",
            "services": list(SERVICES),
            "replicas": self.replicas,
            "gateway_workers": self.gateway_workers,
            "nats_cluster": self.nats_nodes,
            "metrics": metrics,
            "metrics_token_file": str(self.home / "metrics-token"),
            "supervisor_pid": os.getpid(),
        }
        # The targets first: a reader that finds a port in stack.json finds Prometheus's file agreeing.
        write_targets(self.home, metrics)
        tmp = self.home / ".stack.json.tmp"
        tmp.write_text(json.dumps(state, indent=2) + "\n")
        os.replace(tmp, self.home / "stack.json")

    def healthy(self) -> bool:
        """Every gateway port answers its health, and every further replica and worker reports itself
        healthy (the first process of each service answers through the gateway's health)."""
        return all(self._gateway_healthy(port) for port in self.gateway_ports.values()) and all(
            self._reports_healthy(process) for name, process in self.processes if process != name
        )

    @staticmethod
    def _gateway_healthy(port: int) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/health", timeout=2) as r:
                return bool(r.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def _reports_healthy(self, process: str) -> bool:
        child = self.children.get(process)
        return (
            child is not None and child.pid is not None and reports_ok(self.health_dir / f"{process}.json", child.pid)
        )

    # -- supervise ---------------------------------------------------------------------------------

    def supervise_once(self) -> None:
        now = time.monotonic()
        for child in list(self.children.values()):
            if self.stopping or child.alive():
                continue
            if child.name not in self._died_at:
                # Noticed dead: its wait doubles from the last one unless it had run longer than the longest.
                self._died_at[child.name] = now
                base = self.nats_restart_delay if service_of(child.name) == "nats" else self.restart_delay
                self._delays[child.name] = next_delay(self._delays.get(child.name), base, now - child.started_at)
            if now - self._died_at[child.name] < self._delays[child.name]:
                continue
            self._restart(child, uptime=self._died_at.pop(child.name) - child.started_at)
        if not self.stopping and now - self._health_checked >= HEALTH_CHECK_SECONDS:
            self._health_checked = now
            self.restart_unhealthy(now)

    def _restart(self, child: Child, *, uptime: float) -> None:
        code = child.proc.returncode if child.proc else None
        reason = self._killed_for.pop(child.name, None) or f"exited ({code})"
        if child.name in self.gateway_processes and self.gateway_workers > 1 and child.pid is not None:
            worker_exited(child.pid, self.gateway_dirs[gateway_of(child.name)] / "metrics")
        moved = {}
        port = self.metrics_ports.get(child.name)
        if port is not None and not can_listen(port):
            # Another program took its metrics port meanwhile: a new one, or the process could only die again.
            self.metrics_ports[child.name] = free_port()
            child.env["DOSSIER_METRICS_PORT"] = str(self.metrics_ports[child.name])
            moved = {"metrics_port": self.metrics_ports[child.name], "metrics_port_taken": port}
        old_pid = child.pid
        restarts = self.restarts
        delay = self._delays[child.name]

        def record(new_pid: int) -> None:
            if restarts is not None:
                restarts.record(
                    child.name,
                    delay=delay,
                    uptime=uptime,
                    code=code,
                    reason=reason,
                    pid=old_pid,
                    new_pid=new_pid,
                    **moved,
                )

        print(f"dossier: {child.name} {reason}; restarting it", file=sys.stderr, flush=True)
        self._launch(child, before_named=record)
        if moved:
            self.write_state()

    def restart_unhealthy(self, now: float) -> None:
        """Kill a service that stays deaf while NATS answers; the loop above starts it again."""
        if not any(nats_answers(port) for port in self.nats_ports):
            self._nats_up_since = None
            return
        if self._nats_up_since is None:
            self._nats_up_since = now
        if now - self._nats_up_since < self.unhealthy_grace:
            return  # the bus just came back; give every service its grace to reconnect first
        for child in list(self.children.values()):
            report = child.env.get("DOSSIER_HEALTH_FILE")
            if not report or child.pid is None or not child.alive():
                continue  # infrastructure, or a process that is already being restarted
            started_wall = time.time() - (now - child.started_at)
            verdict = read_verdict(Path(report), child.pid, grace=self.unhealthy_grace, started_at=started_wall)
            if not verdict.healthy:
                print(f"dossier: {child.name} is unhealthy ({verdict.reason}); killing it", file=sys.stderr, flush=True)
                self._killed_for[child.name] = f"was unhealthy ({verdict.reason})"
                assert child.proc is not None
                child.proc.kill()
                child.proc.wait(10)

    def run(self) -> int:
        self._lock()
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)
        try:
            self.infra_ready.unlink(missing_ok=True)
            self.restarts = RestartBook(self.home, [*(process for _, process in self.processes), *self._infra_names()])
            self.choose_ports()
            # The services import their code (most of a start's CPU) while the servers start.
            self.start_services()
            self._phase("services launched")
            self.start_infra()
            self.prepare_infra()
            self.write_state()
            announced = False
            started = time.monotonic()
            while not self.stopping:
                self.supervise_once()
                self.log_rotation.check()
                if not announced and self.healthy():
                    announced = True
                    self._phase("healthy")
                    self._announce()
                elif not announced and time.monotonic() - started > HEALTH_TIMEOUT:
                    print(f"dossier: still not healthy; see the logs in {self.log_dir}", file=sys.stderr)
                    started = time.monotonic()
                time.sleep(POLL_SECONDS)
        finally:
            self.stop()
        return 0

    def _infra_names(self) -> list[str]:
        return ["s3", "outside", *(process_name("nats", i) for i in range(1, self.nats_nodes + 1)), "postgres"]

    def _announce(self) -> None:
        unshown = self.token_unshown.exists()
        if self.env.get("DOSSIER_ADMIN_TOKEN"):
            admin = "the one given in DOSSIER_ADMIN_TOKEN"
        elif unshown:
            admin = self.admin_token
        else:
            admin = f"kept in {self.home / 'admin-token'}"
        print(
            "Dossier is up.\n"
            f"  gateway:     http://127.0.0.1:{self.http_port}\n"
            f"  admin token: {admin}\n"
            f"  state:       {self.home}\n"
            "Stop it with Ctrl-C.",
            flush=True,
        )
        if unshown:
            self.token_unshown.unlink()

    def _on_signal(self, signum: int, _frame: object) -> None:
        self.stopping = True

    def stop(self) -> None:
        self.stopping = True
        # Edges first (gateway, services), then the object store and the bus, the database last.
        order = [process for _, process in self.processes] + self._infra_names()
        for name in order:
            child = self.children.get(name)
            if child is not None:
                child.stop()
                (self.pid_dir / f"{name}.pid").unlink(missing_ok=True)
        self.infra_ready.unlink(missing_ok=True)
        if self.restarts is not None:
            self.restarts.close()
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None
        print("Dossier stopped.", flush=True)


def main() -> int:
    return Stack().run()


if __name__ == "__main__":
    raise SystemExit(main())
