"""The one reading of citations: what the claim check counts is what the page links, whatever the escape,
character reference, heading or markup around it."""

from __future__ import annotations

from html.parser import HTMLParser

import pytest

from shared.citations import Citation, blocks, find_citations
from shared.markdown import render_markdown
from tests.support.citation_forms import CITED, SHOWN_AS_TEXT, shown_as_text, written

PUB = "pub_4b50"
NAMED = {"publication": ("publication", PUB, 1, None), "source": ("source", "announcement", 9, "page:1")}


class Anchors(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self.hrefs.append(dict(attrs).get("href") or "")


def hrefs(html: str) -> list[str]:
    anchors = Anchors()
    anchors.feed(html)
    return anchors.hrefs


def counted(text: str) -> list[tuple[str, str, int, str | None]]:
    return [(c.kind, c.id, c.version, c.locator) for b in blocks(text) for c in b.citations]


def href(kind: str, id_: str, version: int, locator: str | None) -> str:
    if kind == "publication":
        return f"/publications/{id_}/versions/{version}"
    return f"/sources/{id_}/versions/{version}/passage?locator={(locator or '').replace(':', '%3A')}"


@pytest.mark.parametrize("form", CITED.values(), ids=CITED.keys())
def test_a_citation_the_page_links_is_counted_however_it_is_written(form: str) -> None:
    text = written(form, PUB)
    expected = NAMED["source" if "announcement" in text else "publication"]
    assert counted(text) == [expected]
    assert hrefs(render_markdown(text)) == [href(*expected)]


@pytest.mark.parametrize("form", SHOWN_AS_TEXT.values(), ids=SHOWN_AS_TEXT.keys())
def test_what_the_page_shows_as_text_is_not_counted(form: str) -> None:
    text = written(form, PUB)
    assert counted(text) == []
    # The only link left is a document's own link to another host.
    assert all(h.startswith("https://example.com/") for h in hrefs(render_markdown(text)))


def test_all_text_forms_in_one_answer_leave_only_the_real_citation() -> None:
    text = "Fund X is liquid (pub_a1@1).\n\n" + shown_as_text(PUB)
    assert counted(text) == [("publication", "pub_a1", 1, None)]
    assert [h for h in hrefs(render_markdown(text)) if h.startswith("/")] == ["/publications/pub_a1/versions/1"]


def test_a_section_not_read_ends_at_the_next_heading() -> None:
    text = "## Not resolved or not read\n- pub_b1@1 was not read: withdrawn\n\n## What the evidence says\n- pub_c@2 x\n"
    assert counted(text) == [("publication", "pub_c", 2, None)]
    html = render_markdown(text)
    assert "<li>pub_b1@1 was not read: withdrawn</li>" in html
    assert hrefs(html) == ["/publications/pub_c/versions/2"]


def test_where_citations_are_does_not_depend_on_the_known_locators() -> None:
    # A locator the run read may hold what looks like a citation (a DOCX heading is the document's text):
    # it never hides that citation from the check while a page without the locators links it.
    text = "memo@v1 docx:h=Risk pub_x@1 notes: gates."
    known = {("memo", 1): ["docx:h=Risk pub_x@1 notes"]}
    with_known, without = find_citations(text, known), find_citations(text)
    assert [(c.start, c.kind, c.id, c.version) for c in with_known] == [
        (c.start, c.kind, c.id, c.version) for c in without
    ]
    assert [c.id for c in without] == ["memo", "pub_x"]
    # A known locator with spaces is taken whole when no citation lies inside it.
    spaced = find_citations("memo@v1 docx:Risk > Liquidity gates: text", {("memo", 1): ["docx:Risk > Liquidity gates"]})
    assert spaced == [Citation(0, 35, "source", "memo", 1, "docx:Risk > Liquidity gates")]


def test_blocks_read_as_the_page_reads_with_offsets_into_that_text() -> None:
    [block] = blocks("- **Gates** of `10%` per quarter (announcement@v1&#32;page:1).\n")
    assert block.listed and block.text == "Gates of 10% per quarter (announcement@v1 page:1)."
    [c] = block.citations
    assert block.text[c.start : c.end] == "announcement@v1 page:1"


def test_a_citation_beyond_a_ref_s_bounds_is_text() -> None:
    assert counted(f"pub_{'a' * 197}@1 and pub_x@1234567890 and pub_y@{2**31}") == []
    assert counted(f"pub_{'a' * 196}@1")[0][1] == f"pub_{'a' * 196}"
