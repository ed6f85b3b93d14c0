"""A run's search pages both kinds of hit: every passage (to the assets search's depth) and every earlier
publication is reached through the cursors, each once, passages first, however the places are shared."""

from __future__ import annotations

from typing import Any

import pytest

from services.runhost.search import PASSAGE_DEPTH, POLICY_PUBLICATIONS, Asked, search_for_run
from shared.errors import Invalid


class Ranked:
    """Owners whose searches answer fixed ranked lists: passages by depth (the assets search's `limit`),
    publications by offset and limit (the publication service's run search)."""

    def __init__(self, passages: int, publications: int):
        self.passages = [f"ev{i}" for i in range(passages)]
        self.publications = [f"pub{i}" for i in range(publications)]

    async def search_evidence_for_run(self, actor: Any, grant: str, *, query: str, limit: int, **_: Any) -> list[str]:
        assert limit <= PASSAGE_DEPTH
        return self.passages[:limit]

    async def search_publications_for_run(
        self, actor: Any, grant: str, *, query: str, limit: int, offset: int = 0
    ) -> list[str]:
        return self.publications[offset : offset + limit]


async def every_page(owners: Any, limit: int, in_all: bool) -> list[tuple[list[str], list[str]]]:
    pages, cursor = [], None
    while len(pages) < 500:
        found = await search_for_run(owners, None, "", Asked("gates", limit, cursor, in_all=in_all))
        pages.append((found.passages, found.publications))
        cursor = found.next_cursor
        if cursor is None:
            return pages
    raise AssertionError("the pages never end")


@pytest.mark.parametrize(
    ("passages", "publications", "limit", "in_all"),
    [(25, 8, 5, True), (25, 8, 1, True), (3, 40, 10, True), (25, 8, 10, False), (0, 12, 10, False)],
)
async def test_every_hit_is_reached_once_through_the_pages(
    passages: int, publications: int, limit: int, in_all: bool
) -> None:
    owners = Ranked(passages, publications)
    pages = await every_page(owners, limit, in_all)
    assert [p for page, _ in pages for p in page] == owners.passages, "every passage once, in rank order"
    assert [u for _, page in pages for u in page] == owners.publications, "every publication once, in rank order"
    for shown, found in pages:
        assert shown or found, "no page is empty"
        assert len(shown) + len(found) <= (limit if in_all else limit + POLICY_PUBLICATIONS)


async def test_a_page_of_the_policys_search_keeps_ten_passages_and_three_publications() -> None:
    (first, *_) = await every_page(Ranked(25, 8), 10, False)
    assert (len(first[0]), len(first[1])) == (10, POLICY_PUBLICATIONS)


async def test_passages_page_to_the_depth_of_the_assets_search() -> None:
    pages = await every_page(Ranked(150, 0), 30, True)
    assert sum(len(shown) for shown, _ in pages) == PASSAGE_DEPTH


async def test_a_cursor_no_page_gave_out_is_refused_naming_it() -> None:
    with pytest.raises(Invalid) as refused:
        owners: Any = Ranked(1, 1)
        await search_for_run(owners, None, "", Asked("gates", 5, "not-a-cursor"))
    assert refused.value.details == {"field": "cursor"}
