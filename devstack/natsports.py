"""The local stack's NATS client ports: chosen once per home and kept, so `nats/events.json` stays valid.

An outside subscriber connects with the servers `$DOSSIER_HOME/nats/events.json` names and reconnects to the
same addresses when the stack restarts. The first start of a home picks free ports (or takes
`DOSSIER_NATS_PORT` for the first node) and writes them to `$DOSSIER_HOME/nats/ports.json`; every later
start listens on the same ones. A port another process holds stops the start with a message that names it,
as a held gateway port does (docs/operations.md).
"""

from __future__ import annotations

import json
from pathlib import Path

from devstack.procs import can_listen, free_port, reserve

PORTS_FILE = Path("nats") / "ports.json"


def nats_client_ports(home: Path, env: dict[str, str], nodes: int) -> list[int]:
    """The client port of each of `nodes` NATS nodes for this home, remembered across restarts."""
    path = home / PORTS_FILE
    kept: list[int] = json.loads(path.read_text())["client"] if path.exists() else []
    wanted = env.get("DOSSIER_NATS_PORT")
    ports = list(kept[:nodes])
    if wanted:
        ports[:1] = [int(wanted)]
    reserve(ports)
    while len(ports) < nodes:
        ports.append(free_port())  # never one of `ports`: they are reserved
    taken = [f"node {i} {port}" for i, port in enumerate(ports, start=1) if not can_listen(port)]
    if taken:
        raise SystemExit(
            f"NATS client ports already in use: {', '.join(taken)}; this home keeps its NATS ports in {path} so "
            "that outside subscribers (nats/events.json) reconnect after a restart. Stop whatever holds them, or "
            "set DOSSIER_NATS_PORT (or delete that file) to move them, and give outside subscribers the new "
            "nats/events.json"
        )
    if ports != kept:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        path.write_text(json.dumps({"client": ports}) + "\n")
    return ports
