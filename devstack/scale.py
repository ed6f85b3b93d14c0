"""Scale-out of the local stack: a NATS cluster (`DOSSIER_NATS_CLUSTER`) and replicas of every process
(`DOSSIER_REPLICAS`), as docs/operations.md names them.

Replica 1 of a service keeps the plain name (`workspace`, `pids/workspace.pid`); replica n is
`workspace.n` (`pids/workspace.n.pid`, `health/workspace.n.json`; its lines in `logs/workspace.log`). NATS nodes
are `nats`, `nats.2`, `nats.3`. Gateway replica n listens on `DOSSIER_HTTP_PORT + n - 1`, with
`DOSSIER_GATEWAY_WORKERS` processes sharing that port: `gateway`, `gateway-w2`, …
(services/gateway/transport/workers.py).
"""

from __future__ import annotations

# The stream declarations need a user allowed to create both streams: the one service that consumes events.
STREAM_DECLARER = "workspace"


def process_name(service: str, replica: int) -> str:
    return service if replica == 1 else f"{service}.{replica}"


def count_setting(env: dict[str, str], name: str, allowed: tuple[int, ...]) -> int:
    raw = env.get(name) or "1"
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value not in allowed:
        raise SystemExit(f"{name}={raw!r}: expected one of {', '.join(map(str, allowed))}")
    return value
