"""Markdown to safe HTML, for answers and publications: CommonMark with raw HTML off (a document's `<script>`
is shown as text), no images (nothing is fetched from elsewhere), and every citation made a link.

The tokens come from `shared.citations.parse`, the reading the run's claim check counts citations in, so a
page links exactly what the check counted. The only other links kept are a document's links to another host;
one that stays on this server (a path, a relative reference) is shown as its text, so no link into the
workbench is one the check did not count.

The workbench's pages and the run's HTML report both render through here, so an answer reads the same in both.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from urllib.parse import quote

from markdown_it.token import Token

from shared.citations import MARKDOWN, Citation, Known, parse

__all__ = ["Known", "citation_href", "render_markdown"]

# Another host to a browser: an absolute http(s) URL or a scheme-relative one, with a host right after `//`.
ELSEWHERE = re.compile(r"(?:https?:)?//[^/\\]", re.IGNORECASE)


def citation_href(c: Citation) -> str:
    """The exact publication version, or the exact passage (the workbench's passage route finds its evidence)."""
    if c.kind == "publication":
        return f"/publications/{quote(c.id, safe='')}/versions/{c.version}"
    return f"/sources/{quote(c.id, safe='')}/versions/{c.version}/passage?locator={quote(c.locator or '', safe='')}"


def _links(children: list[Token], href: Callable[[Citation], str]) -> list[Token]:
    """Citations get their href; a document's link to another host carries no referrer and no opener; any
    other link of the document loses its anchor and keeps its text."""
    kept: list[Token] = []
    opened: list[bool] = []
    for child in children:
        if child.type == "link_open":
            citation = child.meta.get("citation")
            if citation is not None:
                child.attrSet("href", href(citation))
                child.attrSet("class", "cite")
            elif ELSEWHERE.match(str(child.attrGet("href") or "")):
                child.attrSet("rel", "noopener noreferrer nofollow")
            else:
                opened.append(False)
                continue
            opened.append(True)
        elif child.type == "link_close" and not opened.pop():
            continue
        kept.append(child)
    return kept


def render_markdown(
    text: str, *, known: Known | None = None, href: Callable[[Citation], str] = citation_href, shift: int = 0
) -> str:
    """The HTML of `text`; citations outside links and code become links (`href` says where to). `shift`
    lowers the headings (an answer shown under a page's own `h2` starts at `h3`)."""
    tokens = parse(text, known)
    for block in tokens:
        if block.type in ("heading_open", "heading_close") and shift:
            block.tag = f"h{min(6, int(block.tag[1:]) + shift)}"
        if block.type == "inline" and block.children:
            block.children = _links(block.children, href)
    html: str = MARKDOWN.renderer.render(tokens, MARKDOWN.options, {})
    return html
