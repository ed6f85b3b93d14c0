"""Restarts of the local stack's processes: the supervisor's backoff, its record, and what the gateway reads.

The supervisor (devstack/stack.py) is no service: it has no bus connection and no HTTP port. So it keeps its
record where the gateway, which has both, reads it: each restart is one JSON line in
`$DOSSIER_HOME/logs/supervisor.log` (for a person), and the counts, with the times of the last five minutes'
restarts, are rewritten to `$DOSSIER_HOME/restarts.json` (for the gateway). The gateway exports the counts as
`dossier_process_restarts_total{process}` on its `/metrics` (`RestartsCollector`, read at each scrape) and
answers `/v1/health` 503 naming a process restarted more than five times in five minutes (`crash_loops`).
The same pattern as the processes' health reports (shared/health.py), in the other direction.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from prometheus_client.core import CounterMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from shared.observe import JsonFormatter

RESTARTS_FILE = "restarts.json"
SUPERVISOR_LOG = Path("logs") / "supervisor.log"
# The longest wait before a restart; a process that ran longer than this starts again at the base wait.
MAX_BACKOFF_SECONDS = 30.0
# More restarts than this within the window is a crash loop: /v1/health says so, and so does the alert.
CRASH_LOOP_RESTARTS = 5
CRASH_LOOP_WINDOW_SECONDS = 300.0


def next_delay(previous: float | None, base: float, uptime: float) -> float:
    """The wait before restarting a process that died after running `uptime` seconds: `base` for its first
    death, or after a run longer than the longest wait; otherwise twice the last wait, up to 30 s (never
    less than `base`, which fault tests set high to hold a server down)."""
    cap = max(MAX_BACKOFF_SECONDS, base)
    if previous is None or uptime >= cap:
        return base
    return min(previous * 2, cap)


class RestartBook:
    """The supervisor's record: every supervised process at 0 from the start, each restart logged and counted."""

    def __init__(self, home: Path, processes: Iterable[str]):
        self.path = home / RESTARTS_FILE
        self.counts = dict.fromkeys(processes, 0)
        self.recent: dict[str, list[float]] = {}
        self.log = logging.getLogger("dossier.supervisor")
        self.log.propagate = False
        self.log.setLevel(logging.INFO)
        for handler in self.log.handlers[:]:
            self.log.removeHandler(handler)
            handler.close()
        (home / SUPERVISOR_LOG).parent.mkdir(parents=True, exist_ok=True)
        handler = logging.FileHandler(home / SUPERVISOR_LOG)
        handler.setFormatter(JsonFormatter("supervisor"))
        self.log.addHandler(handler)
        self._write()

    def record(
        self, process: str, *, delay: float, uptime: float, code: int | None, reason: str, **fields: object
    ) -> None:
        """One restart of `process`, as it starts again."""
        now = time.time()
        self.counts[process] = self.counts.get(process, 0) + 1
        recent = [t for t in self.recent.get(process, []) if now - t < CRASH_LOOP_WINDOW_SECONDS] + [now]
        self.recent[process] = recent
        line = {
            "process": process,
            "reason": reason,
            "exit_code": code,
            "uptime_seconds": round(uptime, 3),
            "delay_seconds": round(delay, 3),
            "restarts": self.counts[process],
            "restarts_in_window": len(recent),
        }
        self.log.warning(
            "%s %s; restarted after %.1f s (restart %d, %d in 5 minutes)",
            process,
            reason,
            delay,
            self.counts[process],
            len(recent),
            extra={"fields": line | fields},
        )
        self._write()

    def close(self) -> None:
        for handler in self.log.handlers[:]:
            self.log.removeHandler(handler)
            handler.close()

    def _write(self) -> None:
        state = {
            "processes": {name: {"restarts": n, "recent": self.recent.get(name, [])} for name, n in self.counts.items()}
        }
        tmp = self.path.with_name(f".{self.path.name}.tmp")
        tmp.write_text(json.dumps(state) + "\n")
        os.replace(tmp, self.path)


@dataclass(frozen=True)
class Restarts:
    """What `restarts.json` says: each process's count, and the times of its recent restarts."""

    counts: dict[str, int]
    recent: dict[str, list[float]]

    def crash_loops(self, now: float | None = None) -> dict[str, int]:
        """Each process restarted more than CRASH_LOOP_RESTARTS times within the window, with that number."""
        now = time.time() if now is None else now
        within = {
            name: sum(1 for t in times if now - t < CRASH_LOOP_WINDOW_SECONDS) for name, times in self.recent.items()
        }
        return {name: n for name, n in within.items() if n > CRASH_LOOP_RESTARTS}


def read_restarts(path: Path | None) -> Restarts:
    """The supervisor's record; nothing where no supervisor keeps one (a container, a test's process)."""
    try:
        state = json.loads(path.read_text()) if path is not None else {}
    except (OSError, ValueError):
        state = {}
    processes = state.get("processes", {})
    return Restarts(
        counts={name: int(entry["restarts"]) for name, entry in processes.items()},
        recent={name: [float(t) for t in entry["recent"]] for name, entry in processes.items()},
    )


def crash_loop_reason(restarts: int) -> str:
    return f"restarted {restarts} times in the last 5 minutes (see logs/supervisor.log)"


class RestartsCollector(Collector):
    """`dossier_process_restarts_total{process}` from the supervisor's record, read at each scrape."""

    def __init__(self, path: Path | None):
        self.path = path

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily(
            "dossier_process_restarts", "Restarts of each process by the local stack's supervisor", labels=["process"]
        )
        for process, count in sorted(read_restarts(self.path).counts.items()):
            family.add_metric([process], count)
        yield family
