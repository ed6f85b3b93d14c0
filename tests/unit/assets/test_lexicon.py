"""OCR's lines read again against a dictionary (services/assets/extract/lexicon.py): CTC's likelihood of a
reading, and which words it replaces."""

from __future__ import annotations

import itertools
import math

import numpy
import pytest
from rapidocr_onnxruntime.ch_ppocr_rec.utils import CTCLabelDecode

from services.assets.extract.lexicon import DictionaryDecode, correct, english, log_likelihood

CHARACTERS = list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZü")
# RapidOCR's decoder over these characters (given a copy: it adds blank and space to the list it is given), and
# its numbering of them: blank 0, the characters, then the space.
DECODE = CTCLabelDecode(character=list(CHARACTERS))
CLASSES: dict[str, int] = DECODE.dict
WORDS = frozenset({"portfolio", "cash", "notice"})


def columns(*spec: dict[str, float]) -> numpy.ndarray:
    """Probability columns: each gives some characters' probabilities, the rest of its mass to the blank."""
    out = numpy.zeros((len(spec), len(CLASSES)), dtype=numpy.float32)
    for row, probabilities in zip(out, spec, strict=True):
        for char, p in probabilities.items():
            row[CLASSES[char]] = p
        row[0] = 1.0 - sum(probabilities.values())
    return out


def reading(text: str, *, gap: dict[str, float] | None = None, at: int = -1) -> numpy.ndarray:
    """A column per character of `text`, with a blank column between any two; the one after character `at`
    holds `gap` instead of blank alone."""
    spec: list[dict[str, float]] = []
    for n, char in enumerate(text):
        spec += [{char: 0.95}, gap if n == at and gap else {}]
    return columns(*spec)


def brute_force(probabilities: numpy.ndarray, labels: list[int]) -> float:
    """Every path through the columns whose collapse (repeats merged, blanks dropped) is `labels`."""
    total = 0.0
    steps, classes = probabilities.shape
    for path in itertools.product(range(classes), repeat=steps):
        collapsed = [k for n, k in enumerate(path) if k and (n == 0 or path[n - 1] != k)]
        if collapsed == labels:
            total += math.prod(float(probabilities[t, k]) for t, k in enumerate(path))
    return math.log(total) if total else -math.inf


@pytest.mark.parametrize("labels", [[], [1], [1, 2], [1, 1], [2, 1, 2], [1, 2, 3], [3, 3, 3], [1, 2, 1, 2, 1, 2]])
def test_the_likelihood_is_ctcs_summed_over_every_alignment(labels: list[int]) -> None:
    rng = numpy.random.default_rng(len(labels) * 7 + sum(labels))
    probabilities = rng.dirichlet(numpy.ones(4), size=5)
    assert log_likelihood(probabilities, labels) == pytest.approx(brute_force(probabilities, labels), abs=1e-9)


def test_a_readings_likelihood_is_at_most_any_of_its_letters_probability_summed_over_its_columns() -> None:
    # The bound services/assets/extract/lexicon.py uses to skip readings that cannot be likely enough.
    rng = numpy.random.default_rng(11)
    for _ in range(300):
        probabilities = rng.dirichlet(numpy.full(6, 0.3), size=int(rng.integers(3, 9)))
        labels = [int(k) for k in rng.integers(1, 6, size=int(rng.integers(1, 4)))]
        bound = min(float(probabilities[:, k].sum()) for k in labels)
        assert log_likelihood(probabilities, labels) <= math.log(bound) + 1e-9


def test_a_word_outside_the_dictionary_becomes_the_dictionary_word_the_model_finds_likely_enough() -> None:
    # Greedy: blank wins the column after "r" (0.6), so "porfolio"; "portfolio" has 0.4 of that column.
    probabilities = reading("porfolio", gap={"t": 0.4}, at=2)
    assert correct(probabilities, "porfolio", CLASSES, WORDS) == "portfolio"
    # At 0.02 the model's reading is twenty times likelier than the dictionary word's, beyond a tenth: kept.
    unlikely = reading("porfolio", gap={"t": 0.02}, at=2)
    assert correct(unlikely, "porfolio", CLASSES, WORDS) == "porfolio"


def test_a_replaced_word_keeps_the_case_it_was_read_in_and_its_neighbours() -> None:
    for read, meant in (("Porfolio", "Portfolio"), ("PORFOLIO", "PORTFOLIO")):
        line = f"{read} ok"
        probabilities = reading(line, gap={meant[3]: 0.4}, at=2)
        assert correct(probabilities, line, CLASSES, WORDS) == f"{meant} ok"


def test_words_the_dictionary_holds_short_ones_mixed_case_and_other_scripts_are_kept() -> None:
    # Each would become a dictionary word likely enough ("notices", "Portfolio", "portfolio", "cash"): read as
    # a dictionary word, in mixed case, with a letter outside a-z, of three letters.
    for line, gap, at in (("notice", "s", 5), ("PorFolio", "t", 2), ("porfolioü", "t", 2), ("cah", "s", 1)):
        probabilities = reading(line, gap={gap: 0.45}, at=at)
        assert correct(probabilities, line, CLASSES, WORDS | {"notices"}) == line
    # The same columns without the word read in the dictionary: replaced.
    assert correct(reading("notice", gap={"s": 0.45}, at=5), "notice", CLASSES, frozenset({"notices"})) == "notices"


def test_a_text_that_is_not_the_greedy_reading_of_the_columns_is_kept() -> None:
    probabilities = reading("porfolio", gap={"t": 0.4}, at=2)
    assert correct(probabilities, "prfolio", CLASSES, WORDS) == "prfolio"


def test_the_english_dictionary_is_the_wheels_word_list() -> None:
    words = english()
    assert {"portfolio", "liquidity", "redemption", "memorandum"} <= words
    assert "porfolio" not in words
    assert len(words) > 100_000
    assert all(w.isascii() and w.isalpha() and w.islower() for w in words)


def test_the_decoder_reads_again_what_rapidocrs_decoder_reads_with_its_confidence() -> None:
    line = "notice porfolio"
    probabilities = reading(line, gap={"t": 0.4}, at=9)
    [(text, confidence)] = DictionaryDecode(DECODE, lambda: WORDS)(probabilities[numpy.newaxis])
    assert text == "notice portfolio"
    assert confidence == pytest.approx(DECODE(probabilities[numpy.newaxis])[0][1])
    # With word boxes, which follow the greedy reading's columns, the line is the decoder's own.
    kwargs = {"wh_ratio_list": [1.0], "max_wh_ratio": 1.0}
    [boxed] = DictionaryDecode(DECODE, lambda: WORDS)(probabilities[numpy.newaxis], True, **kwargs)
    assert boxed[0] == line
