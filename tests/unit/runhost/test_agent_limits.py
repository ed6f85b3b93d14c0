"""The rules an outside agent's calls are held to, as pure logic: which limit a call would break, and how a
search with `limit` shares its places between passages and earlier publications."""

from __future__ import annotations

import pytest

from services.runhost.admitted import Limits
from services.runhost.leases import limit_reached, not_running
from services.runhost.search import within

LIMITS = Limits(max_steps=3, max_chars=100, max_seconds=60)


@pytest.mark.parametrize(
    ("steps", "chars", "past_deadline", "broken"),
    [
        (3, 100, False, None),
        (4, 0, False, "max_steps"),
        (1, 101, False, "max_chars"),
        (1, 0, True, "max_seconds"),
        (4, 101, True, "max_seconds"),
    ],
)
def test_the_limit_a_call_would_break(steps: int, chars: int, past_deadline: bool, broken: str | None) -> None:
    assert LIMITS.exceeded(steps=steps, chars=chars, past_deadline=past_deadline) == broken


def test_a_run_ended_at_a_limit_says_which_on_every_later_call() -> None:
    assert limit_reached("max_steps", 3).details == {"limit": "max_steps", "status": "failed"}
    ended = not_running("failed", "limit_reached", {"limit": "max_chars", "value": 100})
    assert ended.details == {"status": "failed", "limit": "max_chars"}
    assert not_running("failed", "abandoned").details == {"status": "failed"}


@pytest.mark.parametrize(
    ("limit", "passages", "publications", "shown"),
    [
        (1, 1, 3, (1, 0)),  # one place: the best passage
        (1, 0, 1, (0, 1)),  # no passage matched: the publication
        (10, 10, 3, (7, 3)),  # passages would fill it: the publications still get their places
        (10, 2, 3, (2, 3)),
        (2, 2, 2, (1, 1)),
        (50, 25, 1, (25, 1)),
        (20, 20, 0, (20, 0)),
    ],
)
def test_a_search_shows_at_most_limit_hits(
    limit: int, passages: int, publications: int, shown: tuple[int, int]
) -> None:
    found = within(limit, list(range(passages)), [f"pub{i}" for i in range(publications)])
    assert (len(found.passages), len(found.publications)) == shown
    assert found.passages == list(range(shown[0])), "the best passages, in their order"
