"""The rules an outside agent's calls are held to, as pure logic: how a search with `limit` shares its places
between passages and earlier publications."""

from __future__ import annotations

import pytest

from services.runhost.tools import within


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
