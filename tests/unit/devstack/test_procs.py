"""Ports for the local stack's servers are chosen where no outgoing connection can take them first."""

from __future__ import annotations

import json
import os
import random
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from devstack import procs
from devstack.procs import _ephemeral_start, free_port
from devstack.stack import Stack


def test_a_free_port_is_below_the_ephemeral_range_and_bindable() -> None:
    start = _ephemeral_start()
    for _ in range(50):
        port = free_port()
        if start:
            assert port < start
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", port))


def draws_first(monkeypatch: pytest.MonkeyPatch, ports: list[int]) -> list[int]:
    """Makes the next draws below the ephemeral range hit `ports` in order; returns what is left of them."""
    left = list(reversed(ports))
    real = procs.random.randrange
    monkeypatch.setattr(procs.random, "randrange", lambda a, b: left.pop() if left else real(a, b))
    return left


def test_a_listening_port_is_never_chosen(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("127.0.0.1", free_port()))
        listener.listen()
        taken = listener.getsockname()[1]
        left = draws_first(monkeypatch, [taken, taken])  # then random draws
        assert free_port() != taken
        assert not left


def test_a_port_is_never_offered_twice_by_one_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """A stack draws all its ports before its servers bind them: the same draw twice must not be handed out."""
    first = free_port()
    left = draws_first(monkeypatch, [first, first])  # a port already handed out, and still bindable
    assert free_port() != first
    assert not left
    assert len({free_port() for _ in range(200)}) == 200


def test_without_room_below_the_ephemeral_range_the_kernels_ports_are_offered_once_each(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(procs, "_ephemeral_start", lambda: 0)
    ports = [free_port() for _ in range(20)]
    assert len(set(ports)) == 20
    for port in ports:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", port))


def unoffered_port() -> int:
    """A bindable port below the ephemeral range that this process has not offered or claimed."""
    start = _ephemeral_start() or 60000
    while True:
        port = random.randrange(procs._LOWEST_PORT, start)
        if port not in procs._offered and procs._bindable(port):
            return port


def test_a_stacks_set_and_kept_ports_are_never_drawn_for_its_other_servers(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    gateway, pg, s3, kept_nats = (unoffered_port() for _ in range(4))
    home = tmp_path / "home"
    (home / "nats").mkdir(parents=True)
    (home / "nats" / "ports.json").write_text(json.dumps({"client": [kept_nats]}))
    env = {
        "DOSSIER_HOME": str(home),
        "DOSSIER_HTTP_PORT": str(gateway),
        "DOSSIER_PG_PORT": str(pg),
        "DOSSIER_S3_PORT": str(s3),
    }
    umask = os.umask(0o022)
    try:
        stack = Stack(env)
    finally:
        os.umask(umask)
    set_ports = {gateway, pg, s3, kept_nats}
    left = draws_first(monkeypatch, [gateway, gateway, pg, pg, s3, s3, kept_nats, kept_nats])
    stack.choose_ports()
    assert not left  # the draws did hit them
    assert (stack.nats_port, stack.pg_port, stack.s3_port) == (kept_nats, pg, s3)
    drawn = list(stack.metrics_ports.values())
    assert drawn and not set_ports & set(drawn)
    assert len(set(drawn)) == len(drawn)


def test_a_port_another_process_offered_is_never_drawn_while_that_process_lives(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # What this test process offered before (the stacks of its session) is passed over for that alone: here
    # only the other process's claim may keep its port from being drawn.
    monkeypatch.setattr(procs, "_offered", set())
    other = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys\nfrom devstack.procs import free_port\nprint(free_port(), flush=True)\nsys.stdin.read()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert other.stdout is not None and other.stdin is not None
        theirs = int(other.stdout.readline())
        left = draws_first(monkeypatch, [theirs, theirs])
        assert free_port() != theirs
        assert not left
        other.stdin.close()
        assert other.wait(30) == 0
    finally:
        other.kill()
        other.wait()
    # Once it has ended, its claim is gone with it.
    left = draws_first(monkeypatch, [theirs])
    assert free_port() == theirs
    assert not left


def test_where_no_claim_can_be_made_ports_are_offered_as_before(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A system without abstract sockets (here, claims named in a folder that does not exist)."""
    monkeypatch.setattr(procs, "CLAIM_NAME", str(tmp_path / "absent" / "port-{}"))
    ports = [free_port() for _ in range(5)]
    assert len(set(ports)) == 5
