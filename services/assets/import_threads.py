"""The threads that read files from approved roots: bounded, per scope and in time, and watched by health.

A read can block in the kernel where no timeout reaches it (a network mount that stopped answering, a
FUSE server that never replies); such a thread cannot be cancelled, only outlived. So an import never runs
on the event loop's default executor, which uploads and object storage need: each runs on a daemon thread
of its own, at most `threads` at once and `per_scope` for one scope. A request waits `seconds` for its
scope's turn and as long again for the read, then answers `timeout`. A thread still running after its time
keeps its place (its scope's share stays taken, so stuck reads never take more than that share) and makes
the service's health `degraded` until it ends. Being daemons, stuck threads never hold up the process's exit.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import Callable

from services.assets.acquisition import StagedFile
from shared.errors import Overloaded, Timeout

# `read(deadline)`: the whole import's file work, given the time.monotonic() by which it must end.
Read = Callable[[float], StagedFile]
_Outcome = tuple[StagedFile | None, BaseException | None]


class ImportThreads:
    def __init__(self, *, threads: int, per_scope: int, seconds: float):
        self._threads = max(1, threads)
        self._per_scope = max(1, min(per_scope, self._threads))
        self.seconds = seconds
        self._held: dict[str, int] = {}
        # Reads under way, by number: when each began (time.monotonic), for health.
        self._started: dict[int, float] = {}
        self._numbers = itertools.count()
        self._waiters: list[asyncio.Future[None]] = []

    def running(self, scope: str | None = None) -> int:
        return self._held.get(scope, 0) if scope is not None else sum(self._held.values())

    def problem(self) -> str | None:
        """Reads that outlived their time: the root's storage may hang, and their scopes' shares are taken."""
        now = time.monotonic()
        stuck = sum(1 for began in self._started.values() if now - began > self.seconds)
        if not stuck:
            return None
        return (
            f"{stuck} import{'s' if stuck > 1 else ''} from approved roots did not finish within"
            f" {self.seconds:g} s (the root's storage may hang); {self.running()} of {self._threads} import"
            " threads are taken"
        )

    async def run(self, scope: str, read: Read) -> StagedFile:
        loop = asyncio.get_running_loop()
        await self._take(scope)
        number = next(self._numbers)
        self._started[number] = time.monotonic()
        done: asyncio.Future[StagedFile] = loop.create_future()

        def work() -> None:
            outcome: _Outcome = (None, Timeout("the import ended without a result", {"field": "path"}))
            try:
                outcome = (read(time.monotonic() + self.seconds), None)
            except Exception as exc:
                outcome = (None, exc)
            finally:
                try:
                    loop.call_soon_threadsafe(self._finish, scope, number, done, outcome)
                except RuntimeError:  # the loop has closed: nobody takes the file
                    if outcome[0] is not None:
                        outcome[0].discard()

        try:
            threading.Thread(target=work, name=f"dossier-import-{number}", daemon=True).start()
        except RuntimeError as exc:  # the process may start no more threads: give the share back
            done.cancel()
            self._finish(scope, number, done, (None, None))
            raise Overloaded("no thread is free for the import; try again later") from exc
        try:
            # A little beyond the read's own deadline, which it checks between chunks.
            async with asyncio.timeout(self.seconds + 1):
                return await done  # given up on (a timeout, a cancel): `done` is cancelled with it
        except TimeoutError:
            raise Timeout(
                f"the file could not be read within {self.seconds:g} s", {"field": "path", "limit": self.seconds}
            ) from None

    async def _take(self, scope: str) -> None:
        """Wait (at most `seconds`) until this scope has a share and a thread is free."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.seconds
        while self.running(scope) >= self._per_scope or self.running() >= self._threads:
            waiter: asyncio.Future[None] = loop.create_future()
            self._waiters.append(waiter)
            try:
                async with asyncio.timeout_at(deadline):
                    await waiter
            except TimeoutError:
                mine = self.running(scope) >= self._per_scope
                raise Timeout(
                    f"too many imports {'of this scope ' if mine else ''}are under way; try again later",
                    {"limit": self._per_scope if mine else self._threads},
                ) from None
            finally:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)
        self._held[scope] = self._held.get(scope, 0) + 1

    def _finish(self, scope: str, number: int, done: asyncio.Future[StagedFile], outcome: _Outcome) -> None:
        del self._started[number]
        self._held[scope] -= 1
        if not self._held[scope]:
            del self._held[scope]
        staged, error = outcome
        if done.cancelled():
            if staged is not None:
                staged.discard()
        elif error is not None:
            done.set_exception(error)
        else:
            assert staged is not None
            done.set_result(staged)
        # Every waiter looks again: a share of its scope, or a thread, may be free now.
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)
