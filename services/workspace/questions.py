"""Open questions worth keeping: the same question is never open twice, and a later run resolves what it answered.

- **The same question.** Two texts ask the same question when they read the same once case, spacing and the
  closing punctuation are set aside, or when they hold the same words that say something (any word or
  number but a few like "what", "the", "does": `shared.support.STOPWORDS`), in any order. Adding a question
  that is already open adds nothing.
- **Answered by a later run.** A run answers an open question when
  - the run was asked it: every word of the question that says something is in the run's own question,
    and the run did not leave it open again (none of the questions it proposes holds all those words); or
  - it is a drift's question ("… now has version 2: does what was concluded from it still hold?") and the
    run read, and used, that new version.
  Its proposal then resolves the question, as a person would by id. A question with no word that says
  something is never resolved this way.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence

from shared.contracts.common import Ref
from shared.contracts.workspace import Question
from shared.support import STOPWORDS

_CLOSING = re.compile(r"[\s?!.:;]+$")
# Numbers and one-letter words count: "version 2" and "version 3" are two questions, "Fund X" and "Fund Y" too.
_WORD = re.compile(r"[^\W_]+")


def _plain(text: str) -> str:
    return _CLOSING.sub("", " ".join(text.casefold().split()))


def words(text: str) -> frozenset[str]:
    return frozenset(w for w in _WORD.findall(text.casefold()) if w not in STOPWORDS)


def same_question(a: str, b: str) -> bool:
    if _plain(a) == _plain(b):
        return True
    said = words(a)
    return bool(said) and said == words(b)


def answered_by_run(
    questions: Sequence[Question],
    *,
    question: str | None,
    left_open: Sequence[str],
    used: Collection[str],
    drift_refs: Mapping[str, Ref],
) -> list[str]:
    """The ids of the open questions a run answered. `question`: the run's own; `left_open`: the questions its
    proposal adds; `used`: the keys (`Ref.key()`) of what it read and used; `drift_refs`: each drift question's
    new version, by question id."""
    asked = words(question or "")
    still_open = [words(text) for text in left_open]
    found = []
    for q in questions:
        if q.status != "open":
            continue
        drift = drift_refs.get(q.id)
        if drift is not None and drift.key() in used:
            found.append(q.id)
            continue
        said = words(q.text)
        if said and said <= asked and not any(said <= other for other in still_open):
            found.append(q.id)
    return found
