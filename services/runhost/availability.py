"""Whether a version a run already holds may still be used: its owner says so (publication for
publications, assets for source versions), not the run's own copy of it.

A run keeps what it read in `sources/`, and reads it back from there. That copy is no pass (docs/architecture.md,
eligibility at read time): every read from it asks the owner again, so a publication withdrawn or a source
retired since is refused and recorded as `unavailable`; and when a run's answer is kept, the versions it
consumed are checked once more, so one that became unusable meanwhile is recorded `unavailable` and is
neither a source of the publication nor support for a claim (`WorkerRuns.included_refs`,
`claims.check_answer`). One batch check per owner (`<owner>.check`), no body is read again.
"""

from __future__ import annotations

from collections.abc import Iterable

from services.runhost.ledger import RunLedger
from services.runhost.owners import Owners
from shared.contracts.common import Actor, Eligibility, Ref

# A successor does not take a version away from the run that read it: the claims citing it are marked
# stale later (`new_version`). Every other reason an owner gives (withdrawn, retired, failed, not_found) does.
STILL_USABLE = frozenset({"superseded"})
# At most this many refs in one check (`CheckRequest.refs`).
_BATCH = 1000


async def unusable(owners: Owners, actor: Actor, refs: Iterable[Ref]) -> dict[str, str]:
    """`Ref.key()` → the owner's reason, for those of `refs` a run may no longer use."""
    wanted = list({ref.key(): ref for ref in refs if ref.kind in ("publication", "source")}.values())
    gone: dict[str, str] = {}
    for kind in ("publication", "source"):
        asked = [ref for ref in wanted if ref.kind == kind]
        for start in range(0, len(asked), _BATCH):
            batch = asked[start : start + _BATCH]
            items: list[Eligibility] = await (
                owners.check_publications(actor, batch) if kind == "publication" else owners.check_sources(actor, batch)
            )
            for item in items:
                if not item.available and item.reason not in STILL_USABLE:
                    gone[item.ref.key()] = item.reason or "unavailable"
    return gone


async def withhold_unusable(owners: Owners, ledger: RunLedger, actor: Actor, consumed: list[Ref]) -> None:
    """Before a run's answer is kept: an `unavailable` row for each consumed version its owner no longer
    lets the run use, so it is no source of the publication and supports no claim."""
    gone = await unusable(owners, actor, consumed)
    for ref in consumed:
        if ref.key() in gone:
            await ledger.unavailable(ref, reason=gone[ref.key()])
