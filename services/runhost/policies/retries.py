"""How long one model request is retried: a budget counted in attempts and in time.

Each attempt has its own whole-request deadline (the client's `timeout`). The time budget runs from the
end of the first failed attempt, not from the first attempt's start, so an attempt that hung for its whole
deadline still leaves all of it: a hung request always gets its retry, whatever the two settings are.
A next attempt starts only while both budgets last: at most `max_attempts` attempts (the first included),
and none starting later than `retry_seconds` after the first failure. So the longest one request can take
is one deadline, the budget, and one more deadline.

A server that answers 200 with nothing usable in it (no choices, a body that is not a JSON object) is not
an outage to ride out: `unusable_replies` such answers to one request fail it, whatever budget is left.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from services.runhost.policies.base import PolicyError


class Retryable(Exception):
    """An attempt failed in a way worth another: 429, 5xx, a broken connection, a deadline, an error body."""

    def __init__(self, reason: str, retry_after: float | None = None):
        super().__init__(reason)
        self.reason, self.retry_after = reason, retry_after


class Unusable(Retryable):
    """The server answered, and nothing in the answer is a reply (no choices, no JSON object)."""


class BudgetSpent(PolicyError):
    """No further attempt may start; the message says why, with the attempts and the seconds spent."""


@dataclass
class RetryBudget:
    backoff: float
    max_backoff: float
    retry_seconds: float
    max_attempts: int
    unusable_replies: int
    jitter: Callable[[], float] = random.random
    attempts: int = 0
    unusable: int = 0
    started: float | None = None
    first_failure: float | None = None

    def attempt(self, now: float) -> None:
        """An attempt starts now."""
        self.attempts += 1
        if self.started is None:
            self.started = now

    def after(self, failure: Retryable, now: float) -> float:
        """The wait before the next attempt (exponential backoff, full jitter, Retry-After honoured), or
        `BudgetSpent` when none may start."""
        if self.first_failure is None:
            self.first_failure = now
        started = now if self.started is None else self.started
        spent = f"{self.attempts} attempt{'s' if self.attempts != 1 else ''} in {now - started:.0f} s"
        if isinstance(failure, Unusable):
            self.unusable += 1
            if self.unusable >= self.unusable_replies:
                raise BudgetSpent(
                    f"the model endpoint answered {self.unusable} times with nothing usable ({spent}): {failure.reason}"
                )
        if self.attempts >= self.max_attempts:
            raise BudgetSpent(f"the model endpoint failed {spent}, the most attempts a request makes: {failure.reason}")
        delay: float = min(self.max_backoff, self.backoff * 2 ** (self.attempts - 1)) * self.jitter()
        if failure.retry_after is not None:
            delay = max(delay, failure.retry_after)
        if now + delay > self.first_failure + self.retry_seconds:
            raise BudgetSpent(
                f"the model endpoint failed {spent}, retried for {self.retry_seconds:.0f} s after its first"
                f" failure: {failure.reason}"
            )
        return delay
