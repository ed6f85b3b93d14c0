"""What the gateway lets in before a route runs: the pre-auth body budget and the per-token request rate.

The pre-auth budget lives in this process's memory: it bounds what one process holds, so each worker and
each replica has its own. The token buckets of the workers of one port are shared (`SharedTokenBuckets`,
a file they all map), so a token gets its rate on a port however many workers serve it; replicas on other
ports (`DOSSIER_REPLICAS`) each keep their own, so across the deployment a token's rate is at most the
rate times the number of gateway ports.
"""

from __future__ import annotations

import asyncio
import fcntl
import hashlib
import logging
import math
import mmap
import os
import struct
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from shared.metrics import GATEWAY_REFUSED

log = logging.getLogger("dossier.gateway.admission")

# One log line per reason and interval however many are refused: a flood must not become a log flood.
LOG_INTERVAL_SECONDS = 10.0
# Buckets kept before idle ones (refilled to the brim, so forgetting them changes nothing) are dropped.
MAX_BUCKETS = 100_000


class Tally:
    """Counts refusals of one kind (a metric per refusal) and logs their number at most once an interval."""

    def __init__(self, reason: str, what: str, interval: float = LOG_INTERVAL_SECONDS):
        self.reason = reason
        self.what = what
        self.interval = interval
        self._counter = GATEWAY_REFUSED.labels(reason)
        self._unlogged = 0
        self._logged_at = -math.inf

    def count(self, detail: str = "") -> None:
        self._counter.inc()
        self._unlogged += 1
        now = time.monotonic()
        if now - self._logged_at >= self.interval:
            log.warning(
                "%d %s in the last %.0fs%s",
                self._unlogged,
                self.what,
                min(now - self._logged_at, self.interval),
                f" ({detail})" if detail else "",
                extra={"reason": self.reason},
            )
            self._unlogged = 0
            self._logged_at = now


class PreauthBudget:
    """The bytes of request bodies held before the caller is known, in all; room is reserved before the
    body is read and returned once the request is answered."""

    def __init__(self, capacity: int, wait_seconds: float):
        self.capacity = capacity
        self.wait_seconds = wait_seconds
        self.held = 0
        self._room = asyncio.Condition()
        self._refused = Tally("overloaded", "unauthenticated bodies refused: the pre-auth buffer was full")

    async def reserve(self, size: int) -> bool:
        """Room for `size` bytes, waiting up to `wait_seconds` for it; False (counted) when there is none."""
        if self.held + size <= self.capacity:
            self.held += size
            return True
        if size <= self.capacity:
            try:
                async with asyncio.timeout(self.wait_seconds), self._room:
                    await self._room.wait_for(lambda: self.held + size <= self.capacity)
                    self.held += size
                    return True
            except TimeoutError:
                pass
        self._refused.count(f"{self.held} of {self.capacity} bytes held")
        return False

    async def release(self, size: int) -> None:
        async with self._room:
            self.held -= size
            self._room.notify_all()


class TokenBuckets:
    """A token bucket per API token: `burst` requests at once, refilled at `rate` a second."""

    def __init__(self, rate: float, burst: int):
        self.rate = rate
        self.burst = float(burst)
        self._buckets: dict[str, list[float]] = {}
        self._refused = Tally("rate_limited", "requests over their token's rate")

    def take(self, key: str) -> int:
        """0 when the request may go on; else the whole seconds until the bucket holds a request again."""
        now = time.monotonic()
        bucket = self._buckets.get(key)
        if bucket is None:
            if len(self._buckets) >= MAX_BUCKETS:
                self._forget_full(now)
            self._buckets[key] = [self.burst - 1.0, now]
            return 0
        bucket[0], retry_after = self._draw(bucket[0], now - bucket[1])
        bucket[1] = now
        return retry_after

    def _draw(self, level: float, elapsed: float) -> tuple[float, int]:
        """A bucket at `level` `elapsed` seconds ago, after this request: its new level, and 0 or the whole
        seconds to wait (the refusal counted)."""
        level = min(self.burst, level + elapsed * self.rate)
        if level >= 1.0:
            return level - 1.0, 0
        self._refused.count()
        return level, max(1, math.ceil((1.0 - level) / self.rate))

    def _forget_full(self, now: float) -> None:
        full = [k for k, (level, at) in self._buckets.items() if level + (now - at) * self.rate >= self.burst]
        for key in full:
            del self._buckets[key]
        if len(self._buckets) >= MAX_BUCKETS:
            self._buckets.clear()


class SharedTokenBuckets(TokenBuckets):
    """The same buckets, shared by the workers of one port through a file each of them maps, so a token's
    rate holds across them whichever worker each of its connections lands on.

    A slot is (the token digest's first 64 bits, level, time of the last request on the system-wide
    monotonic clock); a token probes `PROBES` slots from its hash. When they are all held by other tokens,
    the one that has waited longest is given up (refilled, as an idle bucket would be). An exclusive lock
    on the file covers each read and write of a slot."""

    SLOTS = 1 << 17
    PROBES = 8
    _SLOT = struct.Struct("<Qdd")

    def __init__(self, rate: float, burst: int, path: Path):
        super().__init__(rate, burst)
        size = self.SLOTS * self._SLOT.size
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        with self._locked():
            if os.fstat(self._fd).st_size < size:
                os.ftruncate(self._fd, size)
        self._map = mmap.mmap(self._fd, size)

    @contextmanager
    def _locked(self) -> Iterator[None]:
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    def take(self, key: str) -> int:
        ident = _slot_key(key)
        first = ident % self.SLOTS
        size, view = self._SLOT.size, self._map
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        try:
            now = time.monotonic()
            chosen, level, at = -1, self.burst, now
            oldest, oldest_at = first, math.inf
            for probe in range(self.PROBES):
                slot = (first + probe) % self.SLOTS
                held, held_level, held_at = self._SLOT.unpack_from(view, slot * size)
                if held == ident:
                    chosen, level, at = slot, held_level, held_at
                    break
                if held == 0:
                    chosen = slot
                    break
                if held_at < oldest_at:
                    oldest, oldest_at = slot, held_at
            if chosen < 0:
                chosen = oldest
            level, retry_after = self._draw(level, now - at)
            self._SLOT.pack_into(view, chosen * size, ident, level, now)
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
        return retry_after


def _slot_key(key: str) -> int:
    """64 bits of the key, never 0 (an empty slot): its first 16 digits when it is a hex digest (a token's
    sha256, as every caller gives it), else a hash of it."""
    try:
        ident = int(key[:16], 16)
    except ValueError:
        ident = int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "big")
    return ident or 1
