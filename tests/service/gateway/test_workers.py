"""`python -m services.gateway` with several workers (a container's entry point): the parent starts them on
one port, starts again one that dies while the others serve, and stops them all on SIGTERM."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from tests.support.api import probe
from tests.support.gateway import running_gateway, workers_answering
from tests.support.infra import Infra


def children(pid: int) -> set[int]:
    return {int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()}


def dead(pid: int) -> bool:
    """Gone or a zombie: either way its files, the listening socket among them, are closed."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def test_the_parent_restarts_a_dead_worker_and_stops_them_all(infra: Infra, tmp_path: Path) -> None:
    log = tmp_path / "gateway.log"
    with running_gateway(infra, tmp_path, DOSSIER_GATEWAY_WORKERS="2") as gateway:
        token = gateway.token()
        assert probe(lambda: len(children(gateway.pid)) == 2)
        assert probe(lambda: workers_answering(gateway.url, log, "req_before", token=token) == {1, 2})
        # A worker of now, both answering: one that died while they started was already started again.
        killed = min(children(gateway.pid))
        os.kill(killed, signal.SIGKILL)
        # SIGKILL is delivered asynchronously: until the worker is dead its socket is still in the group, and
        # a connection the kernel queues there in that moment is reset when it closes.
        assert probe(lambda: dead(killed))
        # The other worker keeps the port while the parent starts a new one.
        assert workers_answering(gateway.url, log, "req_meanwhile", token=token)
        probe(lambda: len(children(gateway.pid)) == 2 and killed not in children(gateway.pid))
        assert probe(lambda: workers_answering(gateway.url, log, "req_after", token=token) == {1, 2}, timeout=60)
        assert "exited" in log.read_text() and "restarting it" in log.read_text()
        survivors = children(gateway.pid)
    # running_gateway sent SIGTERM to the parent and waited for it: its workers went with it.
    assert not any(Path(f"/proc/{pid}").exists() for pid in survivors)
