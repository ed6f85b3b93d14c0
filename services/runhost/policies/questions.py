"""The open questions the extractive policy proposes: the parts of the run's question that its reading left
unanswered, each asked whole. What a run's reading covers is what it found: of an earlier answer, neither
its headings (its question among them), nor its list of what it did not read or resolve, nor what it quoted
of the answers before it (`findings`).

A question is cut into its parts at `?`, `;` and at a conjunction that starts another question ("…, and what
did the regulator say?"). A part is left open when it holds at least two words that say something
(`shared.support.tokens`) and what the run read covers fewer than half of them. It is proposed as written,
as a question. So a proposal never asks about a single word, and never asks the same part twice.
"""

from __future__ import annotations

import re
from collections.abc import Collection

from shared.support import tokens

# Words that start a question of their own after "and" / "but" / "or".
_ASKING = (
    "what|how|why|when|where|which|who|whom|whose|is|are|was|were|do|does|did|can|could|should|would|will|has|have|had"
)
_PARTS = re.compile(rf"[?;]+|,?\s+(?:and|but|or)\s+(?=(?:{_ASKING})\b)", re.IGNORECASE)
MIN_WORDS = 2
MAX_QUESTIONS = 5
_HEADING = re.compile(r"^ {0,3}#{1,6}(?:\s|$)")
# A section whose heading says this lists what an answer did not find (services/runhost/policies/extractive.py),
# or what the answers before it concluded: an earlier answer is summarised by its own findings, never by the
# conclusions it quoted in turn (which would nest a run's answer inside every later one).
NOT_FOUND_HEADINGS = ("not read", "not resolved", "earlier reports concluded")


def findings(answer: str) -> str:
    """An earlier answer without its headings, without the sections on what it did not read or resolve, and
    without its own summary of the answers before it."""
    kept, skipping = [], False
    for line in answer.splitlines():
        if _HEADING.match(line):
            skipping = any(words in line.lower() for words in NOT_FOUND_HEADINGS)
            continue
        if not skipping:
            kept.append(line)
    return "\n".join(kept)


def unanswered_parts(question: str, covered: Collection[str]) -> list[str]:
    """`covered`: the words (`tokens`) of what the run read. The parts left open, each as a question, once."""
    found: dict[frozenset[str], str] = {}
    for part in _PARTS.split(question):
        text = " ".join(part.split()).strip(" ,.:")
        said = frozenset(tokens(text))
        if len(said) < MIN_WORDS or said in found:
            continue
        if len(said & set(covered)) * 2 < len(said):
            found[said] = text[0].upper() + text[1:] + "?"
    return list(found.values())[:MAX_QUESTIONS]
