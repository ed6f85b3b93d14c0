"""Checked claims: every sentence of a run's answer that cites `source@vN locator` or `pub_…@vN`, checked
against the exact passage it cites, as the run itself read it (its `sources/` files).

The check is deterministic: the share of the claim's terms found in the cited passages, blended with the
share of its word pairs found there (phrase matching). A claim citing anything that is not an `included`
row of the run's ledger (its text never entered a model input) is `unsupported`, whatever it says.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from services.runhost.memory import RunFiles
from services.runhost.policies.text import tokens
from services.runhost.repository import RunRepository
from shared.citations import LOCATOR, PUBLICATION_CITE, SOURCE_CITE, source_locator
from shared.contracts.common import Ref
from shared.contracts.publication import Claim, Support
from shared.db import Database

SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9*(\[])")
SUPPORTED, WEAK = 0.5, 0.2
SUPPORT = ("supported", "weak", "unsupported")
MAX_CLAIMS, MAX_CLAIM_CHARS = 1000, 4000

# (kind, id, version, locator): a material as it was delivered; publications have no locator.
Key = tuple[str, str, int, str | None]


@dataclass(frozen=True)
class Cited:
    key: Key

    @property
    def ref(self) -> Ref:
        kind, id_, version, _ = self.key
        return Ref(kind=kind, id=id_, version=version)  # type: ignore[arg-type]


def claim_units(answer: str) -> list[str]:
    """Bullets and sentences of the answer. Lines under a heading about what was *not* read are left out:
    they name refs to say they were not used, which claims nothing from them."""
    units: list[str] = []
    skipping = False
    for raw in answer.splitlines():
        line = raw.strip()
        if line.startswith("#"):
            skipping = "not read" in line.lower()
            continue
        if not line or skipping:
            continue
        if line.startswith(("- ", "* ")):
            units.append(line[2:].strip())
        else:
            units.extend(s.strip() for s in SENTENCE.split(line) if s.strip())
    return units


def citations(unit: str, known_locators: Mapping[tuple[str, int], list[str]]) -> list[Cited]:
    """The refs a unit cites. A source locator is matched against the locators the run read for that
    version first (they may hold spaces, e.g. a DOCX heading path), else taken as written."""
    found: list[Cited] = []
    for m in PUBLICATION_CITE.finditer(unit):
        found.append(Cited(("publication", m[1], int(m[2]), None)))
    for m in SOURCE_CITE.finditer(unit):
        if m[1].startswith("pub_"):
            continue
        version = int(m[2])
        locator = source_locator(unit[m.end() :], known_locators.get((m[1], version), []))
        if locator is None:
            continue  # `id@vN` without a locator is a mention, not a cited passage
        found.append(Cited(("source", m[1], version, locator)))
    return list(dict.fromkeys(found))


def _strip_citations(unit: str) -> str:
    text = PUBLICATION_CITE.sub(" ", unit)
    return SOURCE_CITE.sub(" ", LOCATOR.sub(" ", text))


def support_score(unit: str, passage: str) -> float:
    claim = tokens(_strip_citations(unit))
    if not claim:
        return 0.0
    words = tokens(passage)
    overlap = len(set(claim) & set(words)) / len(set(claim))
    pairs = set(pairwise(claim))
    phrase = len(pairs & set(pairwise(words))) / len(pairs) if pairs else overlap
    return round(0.6 * overlap + 0.4 * phrase, 3)


def check_claims(answer: str, included: Iterable[Key], passages: Mapping[Key, str]) -> list[Claim]:
    """`included`: the run's `included` ledger rows; `passages`: the text of each material it read."""
    consumed = set(included)
    locators: dict[tuple[str, int], list[str]] = {}
    for kind, id_, version, locator in [*consumed, *passages]:
        if kind == "source" and locator is not None:
            locators.setdefault((id_, version), []).append(locator)
    claims: list[Claim] = []
    for unit in claim_units(answer):
        cited = citations(unit, locators)
        if not cited:
            continue
        if all(c.key in consumed for c in cited):
            score = support_score(unit, "\n".join(passages.get(c.key, "") for c in cited))
        else:
            score = 0.0
        support: Support = "supported" if score >= SUPPORTED else "weak" if score >= WEAK else "unsupported"
        claims.append(Claim(text=unit[:MAX_CLAIM_CHARS], refs=[c.ref for c in cited], support=support, score=score))
        if len(claims) == MAX_CLAIMS:
            break
    return claims


def ledger_key(row: Mapping[str, Any]) -> Key:
    ref = row["ref"]
    return (ref["kind"], ref["id"], ref["version"], row["locator"] if ref["kind"] == "source" else None)


async def check_answer(db: Database, repo: RunRepository, files: RunFiles, answer: str) -> list[Claim]:
    """The claims of a run's answer, against its ledger and its own copies of what it read."""
    async with db.pool.acquire() as conn:
        ledger = await repo.list_ledger(conn, run_id=files.run_id)
        listing = await repo.list_files(conn, run_id=files.run_id)
    # A version recorded `unavailable` (withdrawn or retired while the run held it) supports nothing.
    withheld = {ledger_key(r)[:3] for r in ledger if r["stage"] == "unavailable" and r["ref"] is not None}
    included = [
        key
        for key in (ledger_key(r) for r in ledger if r["stage"] == "included" and r["ref"] is not None)
        if key[:3] not in withheld
    ]
    passages: dict[Key, str] = {}
    for row in listing:
        if row["path"].startswith("sources/") and row["ref"] is not None:
            passages[ledger_key(row)] = await files.read(row["path"])
    return check_claims(answer, included, passages)


def claim_counts(claims: list[Claim]) -> dict[str, int]:
    """The run's `stats` columns for its claims."""
    return {f"claims_{support}": sum(1 for c in claims if c.support == support) for support in SUPPORT}
