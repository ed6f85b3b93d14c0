"""The retry budget of one model request (services/runhost/policies/retries.py), on a simulated clock:
counted in attempts and in time from the first failure, so a hung attempt always gets its retry; a server
answering with nothing usable fails the request after a few answers."""

from __future__ import annotations

import pytest

from services.runhost.policies.retries import BudgetSpent, Retryable, RetryBudget, Unusable
from shared.settings import RunhostSettings


def default(name: str) -> float:
    value = RunhostSettings.model_fields[name].default
    assert isinstance(value, int | float)
    return value


def budget(**options: float) -> RetryBudget:
    """A budget with the settings' defaults but for `options`, its jitter always the longest wait."""
    given = {
        "backoff": default("openai_backoff_seconds"),
        "max_backoff": default("openai_max_backoff_seconds"),
        "retry_seconds": default("openai_retry_seconds"),
        "max_attempts": int(default("openai_max_attempts")),
        "unusable_replies": int(default("openai_unusable_replies")),
    } | options
    return RetryBudget(**given, jitter=lambda: 1.0)  # type: ignore[arg-type]


def attempts_until_spent(retries: RetryBudget, seconds_each: float, failure: Retryable) -> tuple[int, float, str]:
    """Attempts each failing after `seconds_each`: how many were made, when the last ended, and why."""
    now = 0.0
    while True:
        retries.attempt(now)
        now += seconds_each
        try:
            now += retries.after(failure, now)
        except BudgetSpent as spent:
            return retries.attempts, now, str(spent)


def test_with_the_defaults_a_hung_request_gets_its_retries() -> None:
    timeout = default("openai_timeout_seconds")
    attempts, ended, why = attempts_until_spent(budget(), timeout, Retryable(f"no whole reply within {timeout:.0f} s"))
    # Three deadlines, and the two longest waits between them (0.5 s, then 1 s).
    assert attempts == 3 and ended == 3 * timeout + 1.5
    assert why == "the model endpoint failed 3 attempts in 362 s, retried for 180 s after its first failure:" + (
        " no whole reply within 120 s"
    )


@pytest.mark.parametrize("retry_seconds", [0.5, 1.0, 5.0])
def test_a_budget_shorter_than_one_deadline_still_retries_a_hung_attempt(retry_seconds: float) -> None:
    attempts, _, _ = attempts_until_spent(budget(backoff=0.1, retry_seconds=retry_seconds), 10, Retryable("hung"))
    assert attempts == 2


def test_quick_failures_meet_the_attempts_cap() -> None:
    attempts, _, why = attempts_until_spent(budget(max_attempts=4, retry_seconds=3600), 0.01, Retryable("HTTP 503"))
    assert attempts == 4 and why.startswith("the model endpoint failed 4 attempts in ")
    assert why.endswith(", the most attempts a request makes: HTTP 503")


def test_retry_after_past_the_budget_gives_up_at_once() -> None:
    retries = budget(retry_seconds=5)
    retries.attempt(0.0)
    with pytest.raises(BudgetSpent, match="retried for 5 s"):
        retries.after(Retryable("HTTP 429", retry_after=60), 0.1)


def test_replies_with_nothing_usable_fail_the_request_after_three() -> None:
    attempts, _, why = attempts_until_spent(budget(retry_seconds=3600), 0.01, Unusable("a reply without choices"))
    assert attempts == 3
    assert why.startswith("the model endpoint answered 3 times with nothing usable (3 attempts in ")
    assert why.endswith("): a reply without choices")


def test_an_outage_between_unusable_replies_does_not_count_as_one() -> None:
    retries = budget(retry_seconds=3600)
    for failure in [Unusable("a reply without choices"), Retryable("HTTP 503"), Retryable("HTTP 503")]:
        retries.attempt(0.0)
        retries.after(failure, 0.0)
    retries.attempt(0.0)
    retries.after(Unusable("a reply without choices"), 0.0)
    assert retries.unusable == 2
