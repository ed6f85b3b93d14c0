"""Checked claims: every sentence of a run's answer that cites `source@vN locator` or `pub_…@vN`, checked
against the exact passage it cites, as the run itself read it (its `sources/` files).

The check is deterministic (`shared.support`: the share of the claim's terms found in the cited passages,
blended with the share of its word pairs found there). A claim citing anything that is not an `included`
row of the run's ledger (its text never entered a model input) is `unsupported`, whatever it says. Each
claim keeps the locator it cites of each source, so a later re-check against a successor version (the
workspace's, see `services/workspace/staleness.py`) can look at the same place.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from services.runhost.memory import RunFiles
from services.runhost.repository import WorkerRuns
from shared.citations import Block, Citation, Known, blocks
from shared.contracts.common import Ref
from shared.contracts.publication import Claim
from shared.db import Database
from shared.errors import Invalid
from shared.support import grade, support_score

SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9*(\[])")
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


@dataclass(frozen=True)
class Unit:
    """A bullet or a sentence as the reader reads it (`shared.citations.blocks`), and what it cites."""

    text: str
    citations: tuple[Citation, ...]

    @property
    def cited(self) -> list[Cited]:
        return list(dict.fromkeys(Cited((c.kind, c.id, c.version, c.locator)) for c in self.citations))

    @property
    def claim(self) -> str:
        """The unit without its citations: what is checked against the passages."""
        parts, at = [], 0
        for c in self.citations:
            parts.append(self.text[at : c.start])
            at = c.end
        return " ".join([*parts, self.text[at:]])


def claim_units(answer: str, known_locators: Known) -> list[Unit]:
    """Bullets and sentences of the answer, read as the workbench shows it (escapes and character references
    decoded), so the check counts exactly the citations the page links. A source locator is matched against
    the locators the run read for that version first (they may hold spaces, e.g. a DOCX heading path), else
    taken as written. A section under a heading about what was *not* read cites nothing (and links nothing):
    it names refs to say they were not used."""
    units: list[Unit] = []
    for block in blocks(answer, known_locators):
        cites, at, i = block.citations, 0, 0
        for end in [*([] if block.listed else _sentence_ends(block)), len(block.text)]:
            inside = []
            while i < len(cites) and cites[i].start < end:
                inside.append(cites[i])
                i += 1
            piece = block.text[at:end]
            lead = len(piece) - len(piece.lstrip())
            shifted = tuple(c.moved(c.start - at - lead) for c in inside)
            if piece.strip():
                units.append(Unit(piece.strip(), shifted))
            at = end
    return units


def _sentence_ends(block: Block) -> list[int]:
    """Where SENTENCE ends the block's sentences, but never inside a citation (a locator may hold ". A")."""
    ends, i, cites = [], 0, block.citations
    for m in SENTENCE.finditer(block.text):
        while i < len(cites) and cites[i].end <= m.start():
            i += 1
        if i == len(cites) or cites[i].start >= m.start():
            ends.append(m.start())
    return ends


def cited(answer: str, known_locators: Known) -> list[Cited]:
    """Every ref the answer cites, once, in order."""
    return list(dict.fromkeys(c for unit in claim_units(answer, known_locators) for c in unit.cited))


def check_reads(answer: str, ledger: Iterable[Mapping[str, Any]]) -> tuple[list[Cited], dict[Key, Mapping[str, Any]]]:
    """What the answer cites, when each is something this run read at that version, with the run's `read`
    ledger rows by key; else Invalid naming every cited ref it did not read (`details.refs`). An outside
    agent's finish is refused with it (422), a policy's finish is answered back with it."""
    read = {ledger_key(r): r for r in ledger if r["stage"] == "read" and r["ref"] is not None}
    locators: dict[tuple[str, int], list[str]] = {}
    for kind, id_, version, locator in read:
        if kind == "source" and locator is not None:
            locators.setdefault((id_, version), []).append(locator)
    refs = cited(answer, locators)
    missing = [c for c in refs if c.key not in read]
    if missing:
        named = [c.ref.model_dump() | {"locator": c.key[3]} for c in missing]
        raise Invalid("the answer cites material this run did not read at that version", {"refs": named})
    return refs, read


def check_claims(answer: str, included: Iterable[Key], passages: Mapping[Key, str]) -> list[Claim]:
    """`included`: the run's `included` ledger rows; `passages`: the text of each material it read."""
    consumed = set(included)
    locators: dict[tuple[str, int], list[str]] = {}
    for kind, id_, version, locator in [*consumed, *passages]:
        if kind == "source" and locator is not None:
            locators.setdefault((id_, version), []).append(locator)
    claims: list[Claim] = []
    for unit in claim_units(answer, locators):
        refs = unit.cited
        if not refs:
            continue
        if all(c.key in consumed for c in refs):
            score = support_score(unit.claim, "\n".join(passages.get(c.key, "") for c in refs))
        else:
            score = 0.0
        claims.append(
            Claim(
                text=unit.text[:MAX_CLAIM_CHARS],
                refs=[c.ref for c in refs],
                locators=[c.key[3] for c in refs],
                support=grade(score),
                score=score,
            )
        )
        if len(claims) == MAX_CLAIMS:
            break
    return claims


def ledger_key(row: Mapping[str, Any]) -> Key:
    ref = row["ref"]
    return (ref["kind"], ref["id"], ref["version"], row["locator"] if ref["kind"] == "source" else None)


async def check_answer(db: Database, repo: WorkerRuns, files: RunFiles, answer: str) -> list[Claim]:
    """The claims of a run's answer, against its ledger and its own copies of what it read."""
    async with db.statement() as conn:
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
    # A long answer takes a while to parse: off the loop, as a diff is.
    return await asyncio.to_thread(check_claims, answer, included, passages)


def claim_counts(claims: list[Claim]) -> dict[str, int]:
    """The run's `stats` columns for its claims."""
    return {f"claims_{support}": sum(1 for c in claims if c.support == support) for support in SUPPORT}
