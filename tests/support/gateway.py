"""One real gateway process on the test infrastructure, and raw sockets to play clients that misbehave."""

from __future__ import annotations

import json
import re
import secrets
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import httpx

from devstack.procs import free_port, port_open
from shared.children import wait_until
from tests.support.infra import Infra
from tests.support.service import service_process

CSRF = re.compile(r'name="csrf" value="([^"]+)"|/upload\?csrf=([^"]+)"')


@dataclass(frozen=True)
class Gateway:
    url: str
    port: int
    pid: int
    admin: str

    def token(self, scope: str = "acme", principal: str = "alice") -> str:
        r = httpx.post(
            f"{self.url}/v1/admin/tokens",
            json={"scope": scope, "principal": principal},
            headers={"Authorization": f"Bearer {self.admin}"},
            timeout=30,
        )
        r.raise_for_status()
        return str(r.json()["token"])


def workers_answering(url: str, log: Path, request_id: str, *, token: str | None = None) -> set[int]:
    """Which workers of a port answered 20 requests, each on a connection of its own (their lines in `log`).

    With `token`, each request is refused by the route itself (`limit=0`, 422): it takes one from the
    token's rate bucket but needs no other service. Without, it is refused before any route (401) and takes
    nothing from any token's bucket."""
    headers = {"X-Request-ID": request_id, "Connection": "close"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    for _ in range(20):
        r = httpx.get(f"{url}/v1/workspaces?limit=0", headers=headers)
        assert r.status_code == (401 if token is None else 422), r.text
    return workers_in_log(log, request_id)


def workers_in_log(log: Path, request_id: str) -> set[int]:
    """The workers whose lines in the gateway's `log` carry `request_id`."""
    lines = [json.loads(raw) for raw in log.read_text().splitlines() if raw.startswith("{")]
    return {line["worker"] for line in lines if line.get("request_id") == request_id}


@contextmanager
def running_gateway(infra: Infra, log_dir: Path, **env: str) -> Iterator[Gateway]:
    """A gateway alone (no domain service answers its bus calls): enough for everything before a route runs.
    One process unless `DOSSIER_GATEWAY_WORKERS` says otherwise, so its per-process limits are the ones tested."""
    admin = f"adm_{secrets.token_urlsafe(16)}"
    port = free_port()
    env = {"DOSSIER_GATEWAY_WORKERS": "1"} | env
    child = service_process(
        "gateway",
        infra.settings_env("gateway", DOSSIER_ADMIN_TOKEN=admin, DOSSIER_HTTP_PORT=str(port), **env),
        log_dir,
    )
    child.start()
    try:
        wait_until(partial(port_open, port), timeout=60, what=f"gateway on {port}", alive=child.alive)
        assert child.pid is not None
        yield Gateway(f"http://127.0.0.1:{port}", port, child.pid, admin)
    finally:
        child.stop()


@contextmanager
def gateways_on_one_database(infra: Infra, log_dir: Path, **env: str) -> Iterator[tuple[str, str, str]]:
    """Two gateway processes sharing one database: their URLs and the admin token."""
    admin = f"adm_{secrets.token_urlsafe(16)}"
    settings = infra.settings_env("gateway", DOSSIER_ADMIN_TOKEN=admin, **env)
    ports = [free_port(), free_port()]
    children = [
        service_process("gateway", settings | {"DOSSIER_HTTP_PORT": str(port)}, log_dir / f"gw{n}")
        for n, port in enumerate(ports)
    ]
    try:
        for child, port in zip(children, ports, strict=True):
            child.start()
            # One at a time: the first applies the migrations the second then finds done.
            wait_until(partial(port_open, port), timeout=60, what=f"gateway on {port}", alive=child.alive)
        yield f"http://127.0.0.1:{ports[0]}", f"http://127.0.0.1:{ports[1]}", admin
    finally:
        for child in children:
            child.stop()


def connect_from(source: str, port: int) -> socket.socket:
    """A connection to the gateway from another loopback address (all of 127.0.0.0/8 is this host)."""
    return socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(source, 0))


def read_if_closed(sock: socket.socket, seen: bytearray) -> bool:
    """Reads what has arrived without waiting; True once the peer has closed (or reset) the connection."""
    sock.setblocking(False)
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                return True
            seen += chunk
    except BlockingIOError:
        return False
    except OSError:
        return True


def csrf_of(page: httpx.Response) -> str:
    """The CSRF token of a workbench page's forms."""
    found = CSRF.search(page.text)
    assert found, page.text[:500]
    return found.group(1) or found.group(2)


def sign_in(client: httpx.Client, token: str) -> str:
    """Signs `client` in to the workbench with `token`; returns the session cookie's value."""
    form = client.get("/signin")
    r = client.post("/signin", data={"csrf": csrf_of(form), "token": token, "next": "/import"})
    assert r.status_code == 303 and r.headers["location"] == "/import", r.text[:300]
    return str(client.cookies["dossier_session"])
