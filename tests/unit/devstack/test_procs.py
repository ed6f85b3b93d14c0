"""Ports for the local stack's servers are chosen where no outgoing connection can take them first."""

from __future__ import annotations

import socket

import pytest

from devstack import procs
from devstack.procs import _ephemeral_start, free_port


def test_a_free_port_is_below_the_ephemeral_range_and_bindable() -> None:
    start = _ephemeral_start()
    for _ in range(50):
        port = free_port()
        if start:
            assert port < start
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", port))


def test_a_listening_port_is_never_chosen(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("127.0.0.1", free_port()))
        listener.listen()
        taken = listener.getsockname()[1]
        offered = [taken, taken]  # the first two draws hit the listening port, later ones are random
        real = procs.random.randrange
        monkeypatch.setattr(procs.random, "randrange", lambda a, b: offered.pop() if offered else real(a, b))
        assert free_port() != taken
        assert not offered


def test_a_port_is_never_offered_twice_by_one_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """A stack draws all its ports before its servers bind them: the same draw twice must not be handed out."""
    first = free_port()
    offered = [first, first]  # the next two draws repeat a port already handed out, and still bindable
    real = procs.random.randrange
    monkeypatch.setattr(procs.random, "randrange", lambda a, b: offered.pop() if offered else real(a, b))
    assert free_port() != first
    assert not offered
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
