"""Markdown to safe HTML: raw HTML escaped, no images, citations linked to the exact passage or version."""

from __future__ import annotations

from shared.markdown import render_markdown


def test_raw_html_is_text_and_images_are_not_fetched() -> None:
    html = render_markdown('<script>alert(1)</script> <img src=x onerror="alert(1)"> ![i](https://e.com/x.png)')
    assert "<script" not in html and "<img" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "&lt;img src=x" in html


def test_script_links_are_dropped_foreign_links_carry_no_referrer_and_own_links_are_text() -> None:
    html = render_markdown("[a](javascript:alert(1)) [b](https://example.com/) [c](//example.com/) [d](/runs/r) [e](f)")
    assert 'href="javascript' not in html
    assert html.count('rel="noopener noreferrer nofollow"') == 2 and html.count("<a ") == 2
    # A link into the workbench is a citation the check counted, never one the document wrote.
    assert html.endswith(" d e</p>\n")


def test_citations_link_to_the_exact_passage_or_version() -> None:
    html = render_markdown(
        "- **A** (pub_4b50@1, concluded): x\n- announcement@v2 page:3: Daily gates. See memo@v1 now."
    )
    assert '<a href="/publications/pub_4b50/versions/1" class="cite">pub_4b50@1</a>' in html
    assert (
        '<a href="/sources/announcement/versions/2/passage?locator=page%3A3" class="cite">announcement@v2 page:3</a>'
        in html
    )
    # A source named without a locator is a mention: the check counts no passage there, so nothing is linked.
    assert "See memo@v1 now." in html


def test_a_known_locator_with_spaces_is_one_link_and_code_is_left_alone() -> None:
    known = {("memo", 1): ["docx:Risk > Liquidity gates"]}
    html = render_markdown("memo@v1 docx:Risk > Liquidity gates: text `memo@v1 page:1`", known=known)
    assert "locator=docx%3ARisk%20%3E%20Liquidity%20gates" in html
    assert ">memo@v1 docx:Risk &gt; Liquidity gates</a>" in html
    assert "<code>memo@v1 page:1</code>" in html


def test_headings_are_lowered_under_the_page_heading() -> None:
    assert render_markdown("# Q\n\n## A\n\n###### F", shift=2) == "<h3>Q</h3>\n<h4>A</h4>\n<h6>F</h6>\n"
