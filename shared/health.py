"""Each process's own view of its health, kept in a small file the local supervisor reads.

A service that lost NATS keeps running and reconnecting (forever, with a wait between tries), so it
must say that it is deaf: every few seconds it checks its connection (a round trip to the server, and
its own health subject for a service) and rewrites `{"pid", "ok", "since", "at"}`. The supervisor
restarts a process whose file says bad, or stops changing, for longer than its grace, but only while
NATS itself answers (when the bus is down, a restart cannot help).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from nats.aio.client import Client as NATS

log = logging.getLogger("dossier.health")

Check = Callable[[], Awaitable[bool]]


async def connection_answers(nc: NATS, timeout: int = 2) -> bool:
    """Connected, and the server answers a PING (a half-open connection fails this)."""
    if not nc.is_connected:
        return False
    try:
        await nc.flush(timeout=timeout)
    except Exception:
        return False
    return True


STARTING_INTERVAL = 0.1


class HealthReporter:
    def __init__(self, path: Path, check: Check, *, interval: float = 2.0):
        self.path, self.check, self.interval = path, check, interval
        self._ok: bool | None = None
        self._since = time.time()

    async def report_once(self) -> bool:
        try:
            async with asyncio.timeout(self.interval * 2):
                ok = bool(await self.check())
        except Exception:
            ok = False
        if ok != self._ok:
            if self._ok is not None and ok:
                log.info("health is now ok")  # a recovery is news, not a warning
            elif self._ok is not None:
                log.warning("health is now bad (the bus connection is not answering)")
            self._ok, self._since = ok, time.time()
        state = {"pid": os.getpid(), "ok": ok, "since": self._since, "at": time.time()}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.tmp")
        tmp.write_text(json.dumps(state))
        os.replace(tmp, self.path)
        return ok

    async def run(self) -> None:
        # Until its first good report a starting process checks often: the supervisor waits on that report
        # (a whole interval of it was a third of the stack's start).
        ok = await self.report_once()
        while not ok:
            await asyncio.sleep(min(self.interval, STARTING_INTERVAL))
            ok = await self.report_once()
        while True:
            await asyncio.sleep(self.interval)
            await self.report_once()


@dataclass(frozen=True)
class Verdict:
    healthy: bool
    reason: str = ""


def read_verdict(path: Path, pid: int, *, grace: float, started_at: float, now: float | None = None) -> Verdict:
    """The supervisor's reading of a child's health file (wall-clock times, `started_at` included)."""
    now = time.time() if now is None else now
    try:
        state = json.loads(path.read_text())
    except (OSError, ValueError):
        state = None
    if not isinstance(state, dict) or state.get("pid") != pid:
        # No report from this process yet: it is starting; give it the grace from its start.
        if now - started_at > grace:
            return Verdict(False, f"no health report for {now - started_at:.0f}s")
        return Verdict(True)
    if now - float(state.get("at", 0)) > grace:
        return Verdict(False, f"its health report has not changed for {now - float(state.get('at', 0)):.0f}s")
    if not state.get("ok") and now - float(state.get("since", now)) > grace:
        return Verdict(False, f"its bus connection has been bad for {now - float(state['since']):.0f}s")
    return Verdict(True)


def reports_ok(path: Path, pid: int) -> bool:
    """The process `pid` itself has written that it is healthy (a report of an earlier pid says nothing)."""
    try:
        report = json.loads(path.read_text())
    except (OSError, ValueError):
        return False
    return bool(report.get("ok")) and report.get("pid") == pid
