"""Markdown to safe HTML, for answers and publications: CommonMark with raw HTML off (a document's `<script>`
is shown as text), no images (nothing is fetched from elsewhere), and every citation made a link.

The workbench's pages and the run's HTML report both render through here, so an answer reads the same in both.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from urllib.parse import quote

from markdown_it import MarkdownIt
from markdown_it.token import Token

from shared.citations import Citation, find_citations

Known = Mapping[tuple[str, int], list[str]]


def citation_href(c: Citation) -> str:
    """The exact publication version, or the exact passage (the workbench's passage route finds its evidence)."""
    if c.kind == "publication":
        return f"/publications/{quote(c.id, safe='')}/versions/{c.version}"
    if c.locator:
        return f"/sources/{quote(c.id, safe='')}/versions/{c.version}/passage?locator={quote(c.locator, safe='')}"
    return f"/sources/{quote(c.id, safe='')}#v{c.version}"


def _linked(token: Token, known: Known, href: Callable[[Citation], str]) -> list[Token]:
    text, out, at = token.content, [], 0
    for c in find_citations(text, known):
        if c.start < at:
            continue
        if c.start > at:
            out.append(_text(text[at : c.start]))
        opening = Token("link_open", "a", 1)
        opening.attrSet("href", href(c))
        opening.attrSet("class", "cite")
        out += [opening, _text(text[c.start : c.end]), Token("link_close", "a", -1)]
        at = c.end
    if not out:
        return [token]
    if at < len(text):
        out.append(_text(text[at:]))
    return out


def _own(href: str) -> bool:
    """A path on this server; `//host` and `/\\host` are other hosts to a browser."""
    return href.startswith("/") and href[1:2] not in ("/", "\\")


def _text(content: str) -> Token:
    token = Token("text", "", 0)
    token.content = content
    return token


def _parser() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.disable("image")
    return md


_MD = _parser()


def render_markdown(
    text: str, *, known: Known | None = None, href: Callable[[Citation], str] = citation_href, shift: int = 0
) -> str:
    """The HTML of `text`; citations outside links and code become links (`href` says where to). `shift`
    lowers the headings (an answer shown under a page's own `h2` starts at `h3`)."""
    tokens = _MD.parse(text)
    for block in tokens:
        if block.type in ("heading_open", "heading_close") and shift:
            block.tag = f"h{min(6, int(block.tag[1:]) + shift)}"
        if block.type != "inline" or not block.children:
            continue
        children: list[Token] = []
        depth = 0
        for child in block.children:
            depth += child.type == "link_open"
            depth -= child.type == "link_close"
            if child.type == "link_open" and not _own(str(child.attrGet("href") or "")):
                # A document's own link leads away from the workbench: no referrer, no opener.
                child.attrSet("rel", "noopener noreferrer nofollow")
            children += _linked(child, known or {}, href) if child.type == "text" and depth == 0 else [child]
        block.children = children
    html: str = _MD.renderer.render(tokens, _MD.options, {})
    return html
