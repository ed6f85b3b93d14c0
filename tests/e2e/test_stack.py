"""`make up` itself: comes up, restarts a killed service, keeps data, and SIGTERM leaves no process."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from devstack.procs import free_port
from tests.support.stack import RunningStack, alive, start_stack, stop_stack

# Stacks of its own (the local supervisor itself): the local stack only (make test-containers deselects it).
pytestmark = pytest.mark.local_stack


def children_of(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def test_stack_restarts_services_keeps_data_and_stops_cleanly(dossier_homes: Callable[[str], Path]) -> None:
    home = dossier_homes("home")
    stack = start_stack(home)
    try:
        names = ["gateway", "publication", "nats", "postgres", "s3"]
        pids = {name: stack.pid(name) for name in names}
        assert all(alive(p) for p in pids.values())
        token = stack.token("stack-test")
        auth = {"Authorization": f"Bearer {token}"}
        pub = httpx.post(
            f"{stack.url}/v1/publications", json={"title": "kept", "body": "survives"}, headers=auth
        ).json()

        os.kill(pids["publication"], signal.SIGKILL)
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            new_pid = stack.pid("publication")
            if new_pid != pids["publication"] and alive(new_pid):
                break
            time.sleep(0.05)
        else:
            raise AssertionError("the killed service was not restarted within 2 s")
        deadline = time.monotonic() + 30
        while httpx.get(f"{stack.url}/v1/health").status_code != 200:
            assert time.monotonic() < deadline
            time.sleep(0.1)

        all_children = children_of(stack.proc.pid)
        assert len(all_children) >= len(names)
    finally:
        stop_stack(stack.proc)
    assert stack.proc.returncode == 0
    left = [p for p in [*all_children, new_pid] if alive(p)]
    assert left == [], f"processes left after SIGTERM: {left}"
    assert not list((home / "pids").glob("*.pid"))

    # A second start on the same home finds the earlier data and the same admin token, which only the
    # start that generated it printed; this one says where it is kept.
    assert stack.output is not None and f"admin token: {stack.admin_token}" in stack.output.read_text()
    printed = len(stack.output.read_text())
    again = start_stack(home)
    try:
        assert again.admin_token == stack.admin_token
        assert again.output is not None
        later = again.output.read_text()[printed:]
        assert stack.admin_token not in later and f"admin token: kept in {home.resolve() / 'admin-token'}" in later, (
            later
        )
        r = httpx.get(f"{again.url}/v1/publications/{pub['id']}/versions/1", headers=auth)
        assert r.status_code == 200 and r.json()["body"] == "survives"
    finally:
        stop_stack(again.proc)


def test_a_postgres_port_another_server_answers_fails_the_start_at_once(dossier_homes: Callable[[str], Path]) -> None:
    """Postgres cannot bind a port another server holds; the stack says so instead of retrying for 30 s."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as squatter:
        squatter.bind(("127.0.0.1", free_port()))
        squatter.listen()

        def banner() -> None:  # what a NATS server says first to any connection
            with contextlib.suppress(OSError):
                while True:
                    conn, _ = squatter.accept()
                    conn.sendall(b"INFO {}\r\n")
                    conn.close()

        threading.Thread(target=banner, daemon=True).start()
        started = time.monotonic()
        with pytest.raises(RuntimeError, match="postgres exited while starting"):
            start_stack(dossier_homes("squatted"), extra_env={"DOSSIER_PG_PORT": str(squatter.getsockname()[1])})
        assert time.monotonic() - started < 30


def ports_of(stack: RunningStack) -> set[int]:
    """Every port a stack listens on, as its stack.json says."""
    state = stack.state()
    urls = [state["gateway_url"], *state["nats_urls"], *state["metrics"].values()]  # type: ignore[misc, attr-defined]
    ports = {int(str(url).rsplit(":", 1)[1].split("/")[0]) for url in urls}
    return ports | {int(str(state["postgres_port"])), int(str(state["s3_endpoint"]).rsplit(":", 1)[1])}


def test_two_stacks_run_side_by_side_and_the_first_start_that_succeeds_prints_the_token(
    dossier_homes: Callable[[str], Path],
) -> None:
    first, second = dossier_homes("side-a"), dossier_homes("side-b")
    port = free_port()
    # A start that fails (its gateway port held) has made the admin token; it has printed nothing.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as squatter:
        squatter.bind(("127.0.0.1", port))
        squatter.listen()
        with pytest.raises(RuntimeError, match=f"gateway port already in use: {port}"):
            start_stack(first, extra_env={"DOSSIER_HTTP_PORT": str(port)})
    token = (first / "admin-token").read_text().strip()
    assert token not in (first / "stack.out").read_text()

    a = start_stack(first, extra_env={"DOSSIER_HTTP_PORT": str(port)})
    try:
        assert a.output is not None and f"admin token: {token}" in a.output.read_text()
        b = start_stack(second)  # its own home and gateway port; every other port chosen free
        try:
            for stack in (a, b):
                assert httpx.get(f"{stack.url}/v1/health").status_code == 200
            assert not ports_of(a) & ports_of(b)
            assert b.output is not None and f"admin token: {b.admin_token}" in b.output.read_text()
        finally:
            stop_stack(b.proc)
    finally:
        stop_stack(a.proc)
