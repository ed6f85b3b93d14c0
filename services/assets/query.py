"""A search question as terms: words, "quoted phrases" and prefixes (word*). Any term may match (OR).

The ranking rewards passages that match more of the terms (see the repository's search). The terms are
handed to PostgreSQL as text and normalised there, with `simple` and with the stemmer of every language
written in the query's script; nothing the user types is ever spliced into SQL.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from services.assets import language

MAX_TERMS = 12
_TOKEN = re.compile(r'"([^"]*)"?|(\S+)')
_PREFIX = re.compile(r"^(\w{2,})\*+$")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af\uf900-\ufaff]")
# The inserted spaces around CJK characters, and between two highlights of adjacent characters.
_CJK_SPACED = re.compile(r" ?([\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af\uf900-\ufaff]) ?")
_ADJACENT_MARKS = re.compile(r">>\s*<<(?=[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af\uf900-\ufaff])")

TermKind = Literal["word", "phrase", "prefix"]


@dataclass(frozen=True)
class Term:
    kind: TermKind
    text: str


@dataclass(frozen=True)
class Query:
    terms: list[Term]
    # The query's own language: its stopwords are dropped when other words remain.
    config: str
    # Every configuration whose stems a query word is looked up with: a question is too short to tell
    # its language reliably ("Anlegern" alone), so each word is tried in every language of its script.
    configs: list[str]


def parse(q: str) -> Query:
    terms: list[Term] = []
    for match in _TOKEN.finditer(q):
        phrase, word = match.group(1), match.group(2)
        if phrase is not None:
            if phrase.strip():
                terms.append(Term("phrase", " ".join(phrase.split())))
            continue
        prefix = _PREFIX.match(word)
        if prefix is not None and not _CJK.search(word):
            terms.append(Term("prefix", prefix.group(1).lower()))
        else:
            terms.append(Term("word", word))
    unique = list(dict.fromkeys(terms))[:MAX_TERMS]
    return Query(terms=unique, config=language.detect(q), configs=language.configs_for(q))


def tidy_snippet(snippet: str) -> str:
    """Undo the spacing the index put around CJK characters, and join highlights of adjacent ones."""
    if not _CJK.search(snippet):
        return snippet
    return _CJK_SPACED.sub(r"\1", _ADJACENT_MARKS.sub("", snippet))
