"""How an answer cites what it read, and the one reading of an answer that both the run's claim check
(runhost) and the workbench's links (`shared.markdown`) use.

A citation is `pub_…@N` (or `@vN`) for a publication version, `source@vN locator` for a passage. It is
looked for in what a reader reads, not in the markdown source: the text is parsed once (CommonMark, raw
HTML off, no images) and citations are found in its text nodes after backslash escapes and character
references are decoded, so `pub\\_x@1` and `pub&#95;x@1` cite pub_x@1 for the check exactly as the page
links them. Code, a document's own links, and a section whose heading says what was *not read* hold no
citation: the page shows them as text and the check counts nothing there. A source named without a
locator is a mention, not a citation, and is not a link either.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from markdown_it import MarkdownIt
from markdown_it.token import Token

# Read left to right, the first form that matches at a place wins, and the next is looked for after it. Ids
# and versions are bounded as a Ref's are (at most 200 characters, a 32-bit version), digits are ASCII.
CITE = re.compile(
    r"(?<![\w@])(?:"
    r"(?P<pub>pub_[A-Za-z0-9]{1,196})@v?(?P<pub_version>[0-9]{1,9})\b"
    r"|(?!pub_)(?P<source>[A-Za-z0-9][A-Za-z0-9_.\-]{0,199})@v(?P<source_version>[0-9]{1,9})\s+)"
)
LOCATOR = re.compile(r"(?:page|docx|xlsx|html|text):[^\s,;)\]]+")
# A section under a heading that holds this names refs to say they were not used: mentions, not citations.
NOT_READ = "not read"

Known = Mapping[tuple[str, int], list[str]]


@dataclass(frozen=True)
class Citation:
    """One citation: where it starts and ends (in its text node, or in its `Block`), and what it names."""

    start: int
    end: int
    kind: str  # "publication" or "source"
    id: str
    version: int
    locator: str | None

    def moved(self, start: int) -> Citation:
        """The same citation, starting at `start` of another text."""
        return Citation(start, start + self.end - self.start, self.kind, self.id, self.version, self.locator)


@dataclass(frozen=True)
class Block:
    """A paragraph, heading or list item's paragraph as it reads (code spans in, markup out), with the
    citations in it (offsets into `text`)."""

    text: str
    citations: tuple[Citation, ...]
    listed: bool


def _parser() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.disable("image")
    return md


MARKDOWN = _parser()


def source_locator(rest: str, known: list[str]) -> str | None:
    """The locator that starts `rest`: the longest one the run read for that version (they may hold spaces,
    e.g. a DOCX heading path), else one as written; None when nothing there looks like a locator."""
    for loc in sorted(known, key=len, reverse=True):
        if rest.startswith(loc) and not rest[len(loc) : len(loc) + 1].isalnum():
            return loc
    written = LOCATOR.match(rest)
    return written[0].rstrip(":.") if written else None


def find_citations(text: str, known: Known | None = None) -> list[Citation]:
    """Every citation in one text node, in order. Where they are and what they name does not depend on
    `known`: it only says how far a source's locator reaches, and never past the next citation's start."""
    if "@" not in text:
        return []
    matches = list(CITE.finditer(text))
    found = []
    for i, m in enumerate(matches):
        if m["pub"]:
            found.append(Citation(m.start(), m.end(), "publication", m["pub"], int(m["pub_version"]), None))
            continue
        version = int(m["source_version"])
        limit = matches[i + 1].start() if i + 1 < len(matches) else len(text)
        locator = source_locator(text[m.end() : limit], list((known or {}).get((m["source"], version), [])))
        if locator:  # `id@vN` without a locator is a mention, not a cited passage
            found.append(Citation(m.start(), m.end() + len(locator), "source", m["source"], version, locator))
    return found


def _cited(text: str, citations: list[Citation]) -> list[Token]:
    """A text node as text and citation links; each link's `link_open` holds its citation in `meta`."""
    out, at = [], 0
    for c in citations:
        if c.start > at:
            out.append(Token("text", "", 0, content=text[at : c.start]))
        cite = Token("text", "", 0, content=text[c.start : c.end])
        out += [Token("link_open", "a", 1, meta={"citation": c}), cite, Token("link_close", "a", -1)]
        at = c.end
    if at < len(text):
        out.append(Token("text", "", 0, content=text[at:]))
    return out


def _reads(child: Token) -> str:
    """What a reader reads of one inline token: text and code as they are, a line break as a space, and
    nothing of the markup (emphasis, a link's brackets)."""
    if child.type in ("text", "code_inline"):
        return child.content
    return " " if child.type in ("softbreak", "hardbreak") else ""


def parse(text: str, known: Known | None = None) -> list[Token]:
    """The tokens of `text` as the workbench shows them, every citation already a link (`link_open` with
    `meta["citation"]`, its text, `link_close`). Text inside a document's own link is not searched: a link
    cannot hold another."""
    tokens = MARKDOWN.parse(text)
    mentions = False
    for i, block in enumerate(tokens):
        if block.type == "heading_open":
            heading = "".join(_reads(c) for c in tokens[i + 1].children or [])
            mentions = NOT_READ in heading.lower()
        if block.type != "inline" or not block.children or mentions:
            continue
        children: list[Token] = []
        depth = 0
        for child in block.children:
            depth += child.type == "link_open"
            depth -= child.type == "link_close"
            found = find_citations(child.content, known) if child.type == "text" and depth == 0 else []
            children += _cited(child.content, found) if found else [child]
        block.children = children
    return tokens


def blocks(text: str, known: Known | None = None) -> list[Block]:
    """Each run of inline text of `parse(text)` as it reads, with its citations."""
    found: list[Block] = []
    listed = 0
    for token in parse(text, known):
        listed += (token.type == "list_item_open") - (token.type == "list_item_close")
        if token.type != "inline":
            continue
        parts: list[str] = []
        citations: list[Citation] = []
        size, citing = 0, None
        for child in token.children or []:
            if child.type == "link_open" and "citation" in child.meta:
                citing = child.meta["citation"]
                continue
            part = _reads(child)
            if citing is not None:
                citations.append(citing.moved(size))
                citing = None
            parts.append(part)
            size += len(part)
        found.append(Block("".join(parts), tuple(citations), listed > 0))
    return found
