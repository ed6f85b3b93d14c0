"""Several gateway processes on one port (`DOSSIER_GATEWAY_WORKERS`, by default one per core).

Each worker is a whole gateway process (`python -m services.gateway`) that binds the HTTP port itself
with SO_REUSEPORT: the kernel spreads new connections over the listening sockets, and when a worker dies
its socket leaves the group while the others go on serving the port. Linux lets only processes of the
same user join such a group, and whoever starts the workers first checks that nothing else listens on
the port, so no other server can end up sharing it.

The workers share their metrics through prometheus-client's multiprocess mode: every worker writes its
figures to files in `PROMETHEUS_MULTIPROC_DIR`, and `/metrics` on any worker reads them all (counters and
histograms summed over every worker that ever ran, gauges summed over the live ones). Whoever starts the
workers empties that folder first and calls `worker_exited` when one dies.

What each process keeps in its own memory is documented where it is kept (services/gateway/transport/admission.py,
connections.py; docs/operations.md). The MCP endpoint is stateless and tokens and sessions are read from
the database, so a request may land on any worker.

The local stack (devstack/stack.py) starts and supervises every worker itself, each with its own pid file
and health report; they share `logs/gateway.log`, each line naming its worker. `python -m services.gateway` on its own (a container) runs `run_workers`: a small
parent that starts the workers, restarts one that dies, and stops them all on SIGTERM.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import sys
import tempfile
import time
from pathlib import Path

from shared.children import Child, worker_name
from shared.metrics import MULTIPROC_ENV, fresh_metrics_dir, worker_exited

RESTART_DELAY = 0.5
POLL_SECONDS = 0.2


def listen_socket(host: str, port: int, *, shared: bool) -> socket.socket:
    """The HTTP port, bound (uvicorn listens on it); `shared` joins the workers' SO_REUSEPORT group."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if shared:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    return sock


def run_workers(count: int, host: str, port: int) -> int:
    """Runs `count` gateway workers on `host:port` until SIGTERM or SIGINT, restarting any that dies."""
    try:
        # Without SO_REUSEPORT: fails while anything else listens there, even a server that would share.
        listen_socket(host, port, shared=False).close()
    except OSError as exc:
        raise SystemExit(f"gateway port {port} is already in use ({exc})") from None
    shared = Path(tempfile.mkdtemp(prefix="dossier-gateway-"))
    metrics_dir = shared / "metrics"
    fresh_metrics_dir(metrics_dir)
    base = os.environ | {MULTIPROC_ENV: str(metrics_dir), "DOSSIER_GATEWAY_RATES_FILE": str(shared / "rates")}
    argv = [sys.executable, "-m", "services.gateway"]
    children = [
        Child(worker_name("gateway", n), argv, base | {"DOSSIER_GATEWAY_WORKER": str(n)}, None)
        for n in range(1, count + 1)
    ]
    stopping = False

    def stop(_signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    for child in children:
        child.start()
    died_at: dict[str, float] = {}
    try:
        while not stopping:
            now = time.monotonic()
            for child in children:
                if child.alive():
                    continue
                died_at.setdefault(child.name, now)
                if now - died_at[child.name] < RESTART_DELAY:
                    continue
                del died_at[child.name]
                assert child.pid is not None and child.proc is not None
                worker_exited(child.pid, metrics_dir)
                print(f"gateway: {child.name} exited ({child.proc.returncode}); restarting it", file=sys.stderr)
                child.start()
            time.sleep(POLL_SECONDS)
    finally:
        # Every worker drains its requests at once; each is waited for in turn.
        for child in children:
            if child.alive() and child.proc is not None:
                child.proc.send_signal(signal.SIGTERM)
        for child in children:
            child.stop()
        shutil.rmtree(shared, ignore_errors=True)
    return 0
