"""Lexical tools of the extractive policy: tokens, BM25, sentence picking."""

from __future__ import annotations

import math
import re
from collections import Counter

STOPWORDS = frozenset(
    "a about after against also an and any are as at be been before but by can could did do does for from had has have how if in into is it its may "
    "might not of on or our should so than that the their then there these they this those to was we were "
    "what when where which while who why will with would you your still hold earlier new now".split()
)
_WORD = re.compile(r"[a-z0-9][a-z0-9\-']*")
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n{2,}")


def tokens(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower()) if w not in STOPWORDS and len(w) > 1]


def bm25_scores(query: str, documents: list[str], k1: float = 1.5, b: float = 0.75) -> list[float]:
    docs = [tokens(d) for d in documents]
    if not docs:
        return []
    avg = sum(len(d) for d in docs) / len(docs) or 1.0
    df: Counter[str] = Counter()
    for d in docs:
        df.update(set(d))
    n = len(docs)
    terms = set(tokens(query))
    scores = []
    for d in docs:
        tf = Counter(d)
        score = 0.0
        for t in terms:
            if tf[t]:
                idf = math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5))
                score += idf * tf[t] * (k1 + 1) / (tf[t] + k1 * (1 - b + b * len(d) / avg))
        scores.append(score)
    return scores


def key_sentences(text: str, query: str, *, count: int = 3, max_chars: int = 600) -> list[str]:
    """The sentences that best match the query, in document order."""
    sentences = [" ".join(s.split()) for s in _SENTENCE.split(text) if len(s.split()) >= 3]
    if not sentences:
        return []
    scores = bm25_scores(query, sentences)
    best = sorted(range(len(sentences)), key=lambda i: (-scores[i], i))[:count]
    picked, used = [], 0
    for i in sorted(best):
        s = sentences[i][:300]
        if used + len(s) > max_chars:
            break
        picked.append(s)
        used += len(s)
    return picked
