"""The workbench's bottom line: an answer's first lines with headings and markup stripped, cut at a word and
never inside a citation (a DOCX locator holds spaces), and marks that escape what they do not mark."""

from __future__ import annotations

from services.gateway.web.bottomline import cut, first_lines, linked
from services.gateway.web.changes import marked, terms_of
from services.gateway.web.render import snippet_marks
from shared.citations import find_citations

KNOWN = {("minutes", 1): ["docx:h=Investment committee;p=1"]}


def test_first_lines_strip_headings_and_markup() -> None:
    body = "# The question\n\n## What was found\n\n- **Gates** hold at 10 percent minutes@v1 docx:h=Investment committee;p=1\n"
    lines = first_lines(body, KNOWN)
    assert len(lines) == 1
    assert "#" not in lines[0] and "**" not in lines[0]
    assert (
        'locator=docx%3Ah%3DInvestment%20committee%3Bp%3D1">minutes@v1 docx:h=Investment committee;p=1</a>' in lines[0]
    )


def test_a_cut_never_falls_inside_a_citation() -> None:
    text = "word " * 50 + "minutes@v1 docx:h=Investment committee;p=1 and more words after it " * 3
    citations = find_citations(text, KNOWN)
    start = citations[0].start
    for limit in range(start + 1, citations[0].end):
        short = cut(text, citations, limit)
        assert short.endswith("…")
        kept = short[:-1]
        assert all(not (c.start < len(kept) < c.end) for c in citations), limit
    assert cut("short text", [], 280) == "short text"


def test_linked_and_marked_text_is_escaped() -> None:
    assert str(linked("<b>x</b>", None)) == "&lt;b&gt;x&lt;/b&gt;"
    assert (
        str(marked("Gates <i>gates</i>", terms_of("gates")))
        == "<mark>Gates</mark> &lt;i&gt;<mark>gates</mark>&lt;/i&gt;"
    )
    assert str(snippet_marks("a <<gate>> & ‹b›")) == "a <mark>gate</mark> &amp; ‹b›"
