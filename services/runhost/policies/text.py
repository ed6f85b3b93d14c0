"""Lexical tools of the extractive policy: tokens, BM25, sentence picking."""

from __future__ import annotations

import math
import re
from collections import Counter

from shared.support import tokens

__all__ = ["bm25_scores", "clip", "key_sentences", "tokens"]

_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n{2,}")
SENTENCE_CHARS = 300


def clip(sentence: str, limit: int = SENTENCE_CHARS) -> str:
    """A sentence of at most `limit` characters: a longer one is cut at a word, before any parenthesis it
    would leave open (a citation is never cut in two), and says so with an ellipsis."""
    if len(sentence) <= limit:
        return sentence
    cut = sentence[: limit - 1]
    if " " in cut:
        cut = cut[: cut.rfind(" ")]
    while cut.count("(") > cut.count(")"):
        cut = cut[: cut.rfind("(")]
    return cut.rstrip(" ,;:-") + "…"


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
        s = clip(sentences[i])
        if used + len(s) > max_chars:
            break
        picked.append(s)
        used += len(s)
    return picked
