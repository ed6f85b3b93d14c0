"""The claim check as a pure function: citations, sections, locators, scores."""

from __future__ import annotations

import re

import pytest

from services.runhost.claims import check_claims, claim_counts
from shared.markdown import render_markdown
from tests.support.citation_forms import CITED, SHOWN_AS_TEXT, written

PAGE = ("source", "announcement", 1, "page:1")
DOCX = ("source", "memo", 2, "docx:h=Risk / Liquidity;p=3")
PASSAGES = {
    PAGE: "# announcement@v1 page:1\n\nThe board introduces redemption gates of 10 percent per quarter.",
    DOCX: "# memo@v2\n\nRedemptions are suspended until the real estate holdings are sold.",
}


def test_a_source_claim_is_checked_against_the_exact_locator_it_cites() -> None:
    answer = (
        "## What the new evidence says\n"
        "- announcement@v1 page:1: the board introduces redemption gates of 10 percent per quarter.\n"
        "- announcement@v1 page:12: the board introduces redemption gates of 10 percent per quarter.\n"
        "- memo@v2 docx:h=Risk / Liquidity;p=3: redemptions are suspended until the holdings are sold.\n"
        "- memo@v2 docx:h=Risk / Liquidity;p=3: the fund doubled its cash buffer last year.\n"
    )
    claims = check_claims(answer, [PAGE, DOCX], PASSAGES)
    assert [(c.refs[0].id, c.support) for c in claims] == [
        ("announcement", "supported"),
        ("announcement", "unsupported"),  # page:12 was never included
        ("memo", "supported"),
        ("memo", "unsupported"),  # included, but the passage says nothing of the kind
    ]
    assert claim_counts(claims) == {"claims_supported": 2, "claims_weak": 0, "claims_unsupported": 2}


def test_sentences_without_a_cited_passage_and_the_not_read_section_are_not_claims() -> None:
    answer = (
        "# Question\n\nThe fund is fine. announcement@1, a mention without a locator, is not a citation.\n\n"
        "## Not resolved or not read\n- pub_abc@1 was not read: withdrawn\n"
    )
    assert check_claims(answer, [PAGE], PASSAGES) == []


def test_a_partly_matching_claim_is_weak_and_an_uncited_ref_is_always_unsupported() -> None:
    weak = check_claims("Redemption gates stop all trading forever, said announcement@v1 page:1.", [PAGE], PASSAGES)
    assert weak[0].support == "weak" and 0.2 <= weak[0].score < 0.5
    both = check_claims("Gates of 10 percent per quarter (announcement@v1 page:1, pub_xyz@v3).", [PAGE], PASSAGES)
    assert both[0].support == "unsupported" and both[0].score == 0
    assert {r.kind for r in both[0].refs} == {"source", "publication"}


def _linked(html: str) -> set[tuple[str, str, int]]:
    """The refs a page links: publication versions and passages of the workbench."""
    found = set()
    for kind, id_, version in re.findall(r'href="/(publications|sources)/([^/"]+)/versions/(\d+)', html):
        found.add(("publication" if kind == "publications" else "source", id_, int(version)))
    return found


@pytest.mark.parametrize("form", [*CITED.values(), *SHOWN_AS_TEXT.values()], ids=[*CITED, *SHOWN_AS_TEXT])
def test_the_check_counts_exactly_what_the_page_links(form: str) -> None:
    answer = written(form, "pub_b1")
    claims = check_claims(answer, [PAGE], PASSAGES)
    checked = {(r.kind, r.id, r.version) for c in claims for r in c.refs}
    assert checked == _linked(render_markdown(answer))
    assert all(c.support == "unsupported" for c in claims)
    assert len(checked) == (form in CITED.values())


def test_a_cited_heading_is_a_claim_and_a_sentence_never_ends_inside_a_citation() -> None:
    # The run read a locator that holds ". L": the sentence runs on past it.
    answer = "# Gates per announcement@v1 page:1\n\nThe board acts. See memo@v2 docx:h=Risk. Liquidity is thin."
    passages = {("source", "memo", 2, "docx:h=Risk. Liquidity"): "Liquidity is thin."}
    claims = check_claims(answer, [PAGE, *passages], {**PASSAGES, **passages})
    assert [(c.text, [r.id for r in c.refs]) for c in claims] == [
        ("Gates per announcement@v1 page:1", ["announcement"]),
        ("See memo@v2 docx:h=Risk. Liquidity is thin.", ["memo"]),
    ]
