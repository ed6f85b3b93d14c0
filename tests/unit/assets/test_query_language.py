"""Pure pieces of search and extraction: language detection, query terms, snippet tidying, page ranges."""

from __future__ import annotations

import pytest

from services.assets import language, query
from services.assets.extract.pdf import page_ranges


@pytest.mark.parametrize(
    ("text", "config"),
    [
        ("The fund gated redemptions in March and it was not alone.", "english"),
        ("Liquidity gates", "english"),  # Latin script without evidence: English
        ("Die Anleger warteten auf die Rückzahlung und der Markt war nicht ruhig.", "german"),
        ("L'été était très chaud cette année et le café est dans la rue.", "french"),
        ("Календарь знаменательных дат", "russian"),
        ("في قرية من القرى كان هناك رجل حكيم", "arabic"),
        ("中华人民共和国成立于一九四九年", "simple"),
        ("한국어 문서", "simple"),
        ("12345 67", "simple"),
    ],
)
def test_detect(text: str, config: str) -> None:
    assert language.detect(text) == config
    assert config in language.CONFIGS


def test_query_words_are_looked_up_in_every_language_of_their_script() -> None:
    assert language.configs_for("Anlegern")[:2] == ["simple", "english"] and "german" in language.configs_for("x")
    assert language.configs_for("календаря") == ["simple", "russian"]
    assert language.configs_for("共和国") == ["simple"]


def test_query_terms() -> None:
    parsed = query.parse('liquidity "gates were activated" liqu* "unterminated phrase')
    assert parsed.terms == [
        query.Term("word", "liquidity"),
        query.Term("phrase", "gates were activated"),
        query.Term("prefix", "liqu"),
        query.Term("phrase", "unterminated phrase"),
    ]
    assert parsed.config == "english"
    # Duplicates count once; at most MAX_TERMS terms; an operator character is just a word.
    assert len(query.parse(" ".join(f"w{i}" for i in range(50))).terms) == query.MAX_TERMS
    assert query.parse("gate gate").terms == [query.Term("word", "gate")]
    assert query.parse("a* ' & | !").terms[0] == query.Term("word", "a*")


def test_cjk_snippets_lose_the_index_spacing() -> None:
    assert query.tidy_snippet(" 中 华 <<共>> <<和>> <<国>> 成 ") == "中华<<共和国>>成"
    assert query.tidy_snippet("plain <<text>> stays") == "plain <<text>> stays"


def test_page_ranges() -> None:
    assert page_ranges([7, 1, 2, 3, 9, 10]) == "1-3, 7, 9-10"
    assert page_ranges([]) == ""
