"""Which PostgreSQL text search configuration fits a passage (or a query): script first, then stopwords.

A passage's configuration decides its stemming; a query word is looked up with every configuration of
its script (configs_for), so it meets the passage's stem whatever language the passage was detected as.
Scripts with a stemmer get it (Arabic, Cyrillic as Russian, Greek, Devanagari as Hindi, Tamil, Armenian);
Latin text picks the language whose stopwords it uses most, English when it shows none; Chinese, Japanese,
Korean, Hebrew, Thai and the rest get `simple`, and CJK characters are indexed one by one (see the
migration), so a word of any length is found as a phrase of characters.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

# Every configuration detect() may answer; a service test checks that Postgres has each one.
CONFIGS = frozenset(
    {
        "simple",
        "english",
        "french",
        "german",
        "spanish",
        "italian",
        "portuguese",
        "dutch",
        "swedish",
        "danish",
        "norwegian",
        "finnish",
        "hungarian",
        "romanian",
        "turkish",
        "indonesian",
        "russian",
        "arabic",
        "greek",
        "hindi",
        "tamil",
        "armenian",
    }
)
_SCRIPTS = (
    ("arabic", re.compile(r"[\u0600-\u06ff\u0750-\u077f\ufb50-\ufdff\ufe70-\ufeff]")),
    ("russian", re.compile(r"[\u0400-\u04ff]")),
    ("greek", re.compile(r"[\u0370-\u03ff]")),
    ("hindi", re.compile(r"[\u0900-\u097f]")),
    ("tamil", re.compile(r"[\u0b80-\u0bff]")),
    ("armenian", re.compile(r"[\u0530-\u058f]")),
    ("simple", re.compile(r"[\u0590-\u05ff\u0e00-\u0e7f\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af\uf900-\ufaff]")),
)
_LATIN = re.compile(r"[A-Za-z\u00c0-\u024f]")
_WORD = re.compile(r"[^\W\d_]+")
_STOPWORDS = {
    "english": "the and of to in is that for it with as was on are be by this from or have not which",
    "french": "le la les et des est une dans que pour qui pas sur au du ce il sont avec par",
    "german": "der die und das ist nicht ein eine zu den mit sich des auf für dem im auch werden",
    "spanish": "el la los las y que en un una es por con para del se no al lo como más",
    "italian": "il di che la le è per un una non sono della del gli con si nel alla",
    "portuguese": "o os as e que de do da em um uma não para com por se dos das mais",
    "dutch": "de het een en van is dat op te zijn niet met voor die aan er ook",
    "swedish": "och att det som en är på för med av inte den till har de ett om",
    "danish": "og at det som en er på for med af ikke den til har de et",
    "norwegian": "og at det som en er på for med av ikke den til har de et ble",
    "finnish": "ja on ei se että oli kun mutta ovat myös niin joka tai mitä",
    "hungarian": "a az és hogy nem is egy meg van ez mint csak már volt",
    "romanian": "și în de la cu pe este care un o nu din să se mai",
    "turkish": "ve bir bu da de için ile olarak daha çok gibi ama ne",
    "indonesian": "yang dan di ini itu dengan untuk tidak dari dalam akan pada juga adalah",
}
_STOP_INDEX = {lang: frozenset(words.split()) for lang, words in _STOPWORDS.items()}
# Each stopword with the languages that use it, and the ASCII ones as bytes for the ASCII path below.
_STOP_LANGS: dict[str, tuple[str, ...]] = {}
for _lang, _stops in _STOP_INDEX.items():
    for _word in _stops:
        _STOP_LANGS[_word] = (*_STOP_LANGS.get(_word, ()), _lang)
_ASCII_STOP_LANGS = {word.encode(): langs for word, langs in _STOP_LANGS.items() if word.isascii()}
# For ASCII text, _WORD's words are the runs of ASCII letters: this table lowers letters and turns every
# other byte into a space, so bytes.split() gives the same words, lowered, at a fraction of the regex's cost.
_ASCII_WORDS = bytes(c | 0x20 if chr(c).isalpha() else 0x20 for c in range(128)) + b" " * 128
# Enough text to judge; a passage is up to 20,000 characters and judging all of it buys nothing.
_SAMPLE = 1500
_NON_ASCII = re.compile(r"[^\x00-\x7f]+")


def detect(text: str) -> str:
    """The text search configuration for `text` (always one of CONFIGS)."""
    sample = text[:_SAMPLE]
    ascii_only = sample.isascii()
    # Most passages are ASCII: the scripts are counted over the non-ASCII characters only.
    if not ascii_only:
        other = "".join(_NON_ASCII.findall(sample))
        latin = len(_LATIN.findall(sample))
        scripts = Counter({name: len(pattern.findall(other)) for name, pattern in _SCRIPTS})
        name, count = scripts.most_common(1)[0]
        if count > latin:
            return name
    if not _LATIN.search(sample):
        return "simple"
    # Only the sample's stopwords are counted, each for every language that uses it.
    stops: dict[Any, tuple[str, ...]]
    if ascii_only:
        words: list[Any] = sample.encode("ascii").translate(_ASCII_WORDS).split()
        stops = _ASCII_STOP_LANGS
    else:
        words, stops = _WORD.findall(sample.lower()), _STOP_LANGS
    votes = dict.fromkeys(_STOP_INDEX, 0)
    for word, count in Counter(filter(stops.__contains__, words)).items():
        for lang in stops[word]:
            votes[lang] += count
    # The first language of the list wins a tie, English first.
    best = max(votes, key=votes.__getitem__)
    hits = votes[best]
    return best if hits >= 2 and hits > votes["english"] else "english"


_LATIN_CONFIGS = ["english", *(lang for lang in _STOPWORDS if lang != "english")]


def configs_for(text: str) -> list[str]:
    """`simple` plus every stemming configuration of the scripts `text` is written in."""
    configs = ["simple"]
    if _LATIN.search(text):
        configs += _LATIN_CONFIGS
    configs += [name for name, pattern in _SCRIPTS if name != "simple" and pattern.search(text)]
    return configs
