"""What the gateway lets in before a route runs: the pre-auth body budget and the per-token request rate.

Both live in this process's memory. With several gateway processes (replicas), each has its own budget
and its own buckets, so a token's rate across the deployment is at most the per-process rate times the
number of processes.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time

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
        level = min(self.burst, bucket[0] + (now - bucket[1]) * self.rate)
        bucket[1] = now
        if level >= 1.0:
            bucket[0] = level - 1.0
            return 0
        bucket[0] = level
        self._refused.count()
        return max(1, math.ceil((1.0 - level) / self.rate))

    def _forget_full(self, now: float) -> None:
        full = [k for k, (level, at) in self._buckets.items() if level + (now - at) * self.rate >= self.burst]
        for key in full:
            del self._buckets[key]
        if len(self._buckets) >= MAX_BUCKETS:
            self._buckets.clear()
