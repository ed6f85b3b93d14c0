"""How well a passage supports a claim: the one measure the run host's claim check (at a run's finish) and the
workspace's re-check of a stale claim (against a cited version's successor) both apply, so "supported" means
the same on both sides.

The measure is lexical and deterministic: the share of the claim's words found in the passage, blended with
the share of its word pairs found there (phrase matching). Words are lower-cased, at least two characters,
and not in a small list of words that say nothing about the matter (`STOPWORDS`).
"""

from __future__ import annotations

import re
from itertools import pairwise

from shared.citations import find_citations
from shared.contracts.publication import Claim, Support

STOPWORDS = frozenset(
    "a about after against also an and any are as at be been before but by can could did do does for from had has have how if in into is it its may "
    "might not of on or our should so than that the their then there these they this those to was we were "
    "what when where which while who why will with would you your still hold earlier new now".split()
)
SUPPORTED, WEAK = 0.5, 0.2
_WORD = re.compile(r"[a-z0-9][a-z0-9\-']*")


def tokens(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower()) if w not in STOPWORDS and len(w) > 1]


def support_score(claim: str, passage: str) -> float:
    """`claim`: the claim's own words, without its citations."""
    words = tokens(claim)
    if not words:
        return 0.0
    found = tokens(passage)
    overlap = len(set(words) & set(found)) / len(set(words))
    pairs = set(pairwise(words))
    phrase = len(pairs & set(pairwise(found))) / len(pairs) if pairs else overlap
    return round(0.6 * overlap + 0.4 * phrase, 3)


def grade(score: float) -> Support:
    return "supported" if score >= SUPPORTED else "weak" if score >= WEAK else "unsupported"


def checked_words(claim: Claim) -> str:
    """A kept claim's text as it is checked: its citations (`pub_…@N`, `source@vN locator`) cut out. The
    locators it cites may hold spaces, so they are looked for as the claim names them."""
    known: dict[tuple[str, int], list[str]] = {}
    for ref, locator in zip(claim.refs, claim.locators, strict=False):
        if locator and ref.version is not None:
            known.setdefault((ref.id, ref.version), []).append(locator)
    parts, at = [], 0
    for c in find_citations(claim.text, known):
        parts.append(claim.text[at : c.start])
        at = c.end
    return " ".join([*parts, claim.text[at:]])
