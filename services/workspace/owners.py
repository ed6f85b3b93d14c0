"""Calls to the services that own what a workspace refers to: eligibility checks and artifact retention.

Availability is asked in one batch per owner, all owners at once, each with a deadline. An owner that
does not answer in time marks its refs `owner_unreachable`; an owner that answers with an error or an
answer that does not line up with the question marks them `owner_failed`. Nothing is ever dropped, and
nothing the owner did not confirm is ever reported as available.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from pydantic import ValidationError

from shared.bus import BusClient
from shared.contracts import artifact as artifact_contract
from shared.contracts import publication as publication_contract
from shared.contracts.common import Actor, CheckReply, CheckRequest, Eligibility, Ref, Subject
from shared.contracts.workspace import ASSETS_CHECK
from shared.errors import DomainError, Unreachable

log = logging.getLogger("dossier.workspace.owners")

# Which owner answers for a ref kind. Evidence refs are not checked here: a checkpoint names the source.
CheckSubject = Subject[CheckRequest, CheckReply]
OWNER_OF_KIND: dict[str, CheckSubject] = {
    "publication": publication_contract.CHECK,
    "source": ASSETS_CHECK,
    "artifact": artifact_contract.CHECK,
}
BATCH_LIMIT = 1000  # CheckRequest's bound; larger sets are sent as consecutive batches to the same owner.
UNREACHABLE = "owner_unreachable"
FAILED = "owner_failed"


@dataclass(frozen=True)
class Verdict:
    """The owner's answer about one ref, or why there is none."""

    available: bool
    reason: str | None
    version: int | None = None
    title: str | None = None
    created_at: datetime | None = None
    run_id: str | None = None


class Owners:
    def __init__(self, bus: Callable[[], BusClient], *, check_timeout: float, retain_timeout: float):
        # The bus exists only once the runtime has connected, so it is looked up at call time.
        self._bus = bus
        self._check_timeout = check_timeout
        self._retain_timeout = retain_timeout

    async def check_eligibility(self, actor: Actor, refs: Sequence[Ref]) -> list[Verdict]:
        """One verdict per ref, in order: one batch per owner service, every owner concurrently."""
        by_owner: dict[CheckSubject, list[int]] = {}
        verdicts: list[Verdict | None] = [None] * len(refs)
        for i, ref in enumerate(refs):
            if ref.kind in OWNER_OF_KIND:
                by_owner.setdefault(OWNER_OF_KIND[ref.kind], []).append(i)
            else:
                verdicts[i] = Verdict(False, "no_owner_to_check")

        async def ask(subject: CheckSubject, positions: list[int]) -> None:
            answers = await self._check_owner(subject, actor, [refs[i] for i in positions])
            for i, verdict in zip(positions, answers, strict=True):
                verdicts[i] = verdict

        await asyncio.gather(*(ask(subject, positions) for subject, positions in by_owner.items()))
        return [v if v is not None else Verdict(False, FAILED) for v in verdicts]

    async def check_publications(self, actor: Actor, refs: Sequence[Ref]) -> list[Verdict]:
        return await self._check_owner(publication_contract.CHECK, actor, refs)

    async def check_sources(self, actor: Actor, refs: Sequence[Ref]) -> list[Verdict]:
        return await self._check_owner(ASSETS_CHECK, actor, refs)

    async def check_artifacts(self, actor: Actor, refs: Sequence[Ref]) -> list[Verdict]:
        return await self._check_owner(artifact_contract.CHECK, actor, refs)

    async def _check_owner(self, subject: CheckSubject, actor: Actor, refs: Sequence[Ref]) -> list[Verdict]:
        verdicts: list[Verdict] = []
        for start in range(0, len(refs), BATCH_LIMIT):
            batch = list(refs[start : start + BATCH_LIMIT])
            verdicts.extend(await self._check_batch(subject, actor, batch))
        return verdicts

    async def _check_batch(self, subject: CheckSubject, actor: Actor, refs: list[Ref]) -> list[Verdict]:
        try:
            reply = await self._bus().call(subject, CheckRequest(refs=refs), actor=actor, timeout=self._check_timeout)
        except Unreachable:
            return [Verdict(False, UNREACHABLE) for _ in refs]
        except (DomainError, ValidationError):
            log.warning("%s answered with an error or a malformed reply", subject, exc_info=True)
            return [Verdict(False, FAILED) for _ in refs]
        if len(reply.items) != len(refs):
            log.warning("%s answered %d items for %d refs", subject, len(reply.items), len(refs))
            return [Verdict(False, FAILED) for _ in refs]
        return [_verdict(ref, item) for ref, item in zip(refs, reply.items, strict=True)]

    async def retain_artifact(self, actor: Actor, artifact_id: str) -> artifact_contract.Retention:
        """Ask the artifact service to keep the file (no expiry). Its refusals propagate as they are."""
        return await self._bus().call(
            artifact_contract.RETAIN,
            artifact_contract.RetainRequest(artifact_id=artifact_id),
            actor=actor,
            timeout=self._retain_timeout,
        )


def _verdict(asked: Ref, item: Eligibility) -> Verdict:
    # An answer about some other record is no answer about this one.
    if item.ref.kind != asked.kind or item.ref.id != asked.id:
        return Verdict(False, FAILED)
    if asked.version is not None and item.ref.version != asked.version:
        return Verdict(False, FAILED)
    reason = None if item.available else (item.reason or "unavailable")
    return Verdict(
        available=item.available,
        reason=reason,
        version=item.ref.version,
        title=item.title,
        created_at=item.created_at,
        run_id=item.run_id,
    )
