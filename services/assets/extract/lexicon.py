"""A recognised line read again against a dictionary, as Tesseract reads with its word lists.

The recognition model (services.assets.extract.ocr) gives, for each column of a text line, a probability for
every character and for none (CTC's blank), and RapidOCR reads the line as the likeliest character of each
column. That reading can make a word no dictionary holds ("porfolio") where a word one edit away
("portfolio") is nearly as likely over the same columns. Such a word (letters a-z only, four or more, in
lower case, capitalised or in capitals) is replaced by the likeliest dictionary word one edit away (a letter
left out, added, changed, or two swapped) when the model gives that word at least a tenth of the likelihood
of the word read (`_PRIOR`); a word's likelihood over its columns is CTC's, summed over every alignment.
Words the dictionary holds are kept as read, and so are those no dictionary word comes near under the model:
names, codes, other languages.

The dictionary is the English word list of pyspellchecker's wheel (its data only; about 128,000 words of
letters a-z), read once per process, as OCR reads its first line. Measured (bench/ocr.py's six pages of
11 pt text, and two pages each of four of the test corpus's PDFs rendered at 200 dpi and read without their
text layer): words found 1,730 → 1,732 of 1,732 (two "porfolio" read at 0.45 and 0.31 of "portfolio"'s
likelihood) and 2,760 → 2,761 of 2,873 ("Proteector", whose reading was less likely than "Protector"), no
word found before lost; the nearest word kept was a name, "Negat", at 0.07 of "Neat"'s likelihood.
"""

from __future__ import annotations

import functools
import gzip
import importlib.util
import math
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy
import orjson

# A dictionary word is taken over the word read when the model gives it at least this share of that word's
# likelihood (natural logarithm of a tenth).
_PRIOR = math.log(10)
# Shorter words are kept as read: a word of three letters or fewer has many neighbours in any dictionary.
_SHORTEST = 4
_LETTERS = "abcdefghijklmnopqrstuvwxyz"
_WORD = re.compile(r"[^\W\d_]+")
# The columns' probabilities are clipped here before their logarithm is taken.
_FLOOR = 1e-30


@functools.cache
def english() -> frozenset[str]:
    """English words of letters a-z, lower case: pyspellchecker's frequency list, without importing it."""
    spec = importlib.util.find_spec("spellchecker")
    if spec is None or spec.origin is None:
        raise RuntimeError("pyspellchecker is not installed")
    data = Path(spec.origin).parent / "resources" / "en.json.gz"
    words: dict[str, int] = orjson.loads(gzip.decompress(data.read_bytes()))
    return frozenset(w for w in words if w.isascii() and w.isalpha() and len(w) >= _SHORTEST - 1)


def log_likelihood(probabilities: numpy.ndarray, labels: Sequence[int]) -> float:
    """CTC's log-likelihood of `labels` (class indices, blank 0) over `probabilities` (columns × classes):
    every alignment's, summed (the forward algorithm)."""
    columns = probabilities.shape[0]
    if not labels:
        return float(numpy.log(numpy.maximum(probabilities[:, 0], _FLOOR)).sum())
    if len(labels) > columns:
        return -math.inf
    extended = numpy.zeros(2 * len(labels) + 1, dtype=numpy.intp)
    extended[1::2] = labels
    # A label may follow the one two states back (past a blank) unless it repeats it.
    skips = numpy.zeros(len(extended), dtype=bool)
    skips[3::2] = extended[3::2] != extended[1:-2:2]
    froms = numpy.nonzero(skips)[0]
    # Only the classes of these labels are looked at: a line's columns hold thousands.
    emitted = numpy.log(numpy.maximum(probabilities[:, extended], _FLOOR))
    alpha = numpy.full(len(extended), -numpy.inf)
    alpha[:2] = emitted[0, :2]
    for column in range(1, columns):
        step = alpha.copy()
        step[1:] = numpy.logaddexp(step[1:], alpha[:-1])
        step[froms] = numpy.logaddexp(step[froms], alpha[froms - 2])
        alpha = step + emitted[column]
    return float(numpy.logaddexp(alpha[-1], alpha[-2]))


def _edits(word: str) -> set[str]:
    """Every string one edit from `word` (lower case a-z)."""
    splits = [(word[:i], word[i:]) for i in range(len(word) + 1)]
    return (
        {a + b[1:] for a, b in splits if b}
        | {a + b[1] + b[0] + b[2:] for a, b in splits if len(b) > 1}
        | {a + c + b[1:] for a, b in splits if b for c in _LETTERS}
        | {a + c + b for a, b in splits for c in _LETTERS}
    )


def _cased(word: str, like: str) -> str:
    if like.isupper():
        return word.upper()
    return word.capitalize() if like[0].isupper() else word


def _checked(word: str) -> bool:
    """Whether a word read is one to look up: a-z letters, four or more, lower case, capitalised or capitals."""
    return (
        len(word) >= _SHORTEST
        and word.isascii()
        and (word.islower() or word.isupper() or (word[0].isupper() and word[1:].islower()))
    )


def correct(probabilities: numpy.ndarray, text: str, classes: dict[str, int], words: frozenset[str]) -> str:
    """The line `text`, read greedily from `probabilities` (columns × classes, blank 0), with each word outside
    `words` replaced by the likeliest dictionary word one edit away that is likely enough (see the module)."""
    unknown = [w for w in _WORD.finditer(text) if _checked(w.group()) and w.group().lower() not in words]
    if not unknown:
        return text
    path = probabilities.argmax(axis=1)
    # Where each character of the greedy reading was emitted: its first and last column.
    spans: list[tuple[int, int]] = []
    previous = 0
    for column, label in enumerate(path.tolist()):
        if label and label == previous:
            spans[-1] = (spans[-1][0], column)
        elif label:
            spans.append((column, column))
        previous = label
    if len(spans) != len(text):
        return text  # not the greedy reading of these columns: nothing to read again
    pieces: list[str] = []
    kept = 0
    for found in unknown:
        word = found.group()
        candidates = _edits(word.lower()) & words
        if not candidates:
            continue
        # The word's columns: from the one after its left neighbour's last to the one before its right
        # neighbour's first, so that the blanks around it count for every reading.
        first = spans[found.start() - 1][1] + 1 if found.start() else 0
        last = spans[found.end()][0] if found.end() < len(text) else len(path)
        columns = probabilities[first:last]

        def score(reading: str, columns: numpy.ndarray = columns) -> float:
            labels = [classes.get(c, -1) for c in reading]
            return -math.inf if -1 in labels else log_likelihood(columns, labels)

        # A reading is worth computing only if it can be likely enough: every alignment of it emits each of its
        # letters in some column, so its likelihood is at most any letter's probability summed over the columns
        # (most readings one edit away bring a letter the model saw nowhere there).
        least = score(word) - _PRIOR
        readings = [_cased(c, word) for c in sorted(candidates)]
        mass = {
            x: float(columns[:, k].sum()) if (k := classes.get(x, -1)) >= 0 else 0.0 for x in set("".join(readings))
        }
        enough = math.exp(least)
        possible = [r for r in readings if min(mass[x] for x in r) >= enough]
        if not possible:
            continue
        best, likeliest = max((score(r), r) for r in possible)
        if best >= least:
            pieces += [text[kept : found.start()], likeliest]
            kept = found.end()
    return "".join([*pieces, text[kept:]]) if pieces else text


class DictionaryDecode:
    """RapidOCR's CTC decoder (`decode`, whose `dict` numbers its characters, blank 0), each line it reads then
    read again against the dictionary `words()` (loaded at the first line)."""

    def __init__(self, decode: Any, words: Callable[[], frozenset[str]] = english):
        self.decode = decode
        # The decoder's own numbering: a reading's letters are looked up in it (its "blank" is no letter).
        self.classes: dict[str, int] = decode.dict
        self.words = words

    def __call__(self, preds: numpy.ndarray, return_word_box: bool = False, **kwargs: Any) -> list[Any]:
        lines: list[Any] = self.decode(preds, return_word_box, **kwargs)
        if return_word_box:
            return lines  # boxes follow the columns of the greedy reading: kept as it is
        return [
            (correct(row, text, self.classes, self.words()), *rest)
            for row, (text, *rest) in zip(preds, lines, strict=True)
        ]
