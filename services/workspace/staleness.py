"""Stale claims: the claims of a publication version are checked again when a version they cite changes.

The drift handlers (services/workspace/drift.py) announce `workspace.citation_changed` for every publication
version of the scope that cites the changed version, in the transaction that records the change. This
consumer of that event does the re-check outside that transaction, so a slow owner never holds a drift:

- it reads the citing version's claims from the publication service (a withdrawn citing version has none
  to show, and is left alone);
- for a source's successor, it reads the passage at the locator the claim cited, or, when the successor
  has no passage there, the passages of that version the evidence search ranks first for the claim's
  words (the best of them counts), and scores the claim against it with the run's own measure
  (`shared.support`);
- it sends each claim's mark to the publication service, which keeps it beside the claim (and checks a
  claim against a publication's successor itself: that body is its own).

An owner that does not answer fails the event, and the consumer tries it again later; marking the same
claim again changes nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from shared.bus import BusClient
from shared.contracts import assets as a
from shared.contracts import publication as p
from shared.contracts import workspace as c
from shared.contracts.common import PAGE_LIMIT_MAX as PAGE
from shared.contracts.common import Actor, Ref
from shared.contracts.publication import Support
from shared.errors import NotFound, Unavailable
from shared.events import EventContext, consumes
from shared.support import checked_words, grade, support_score, tokens

log = logging.getLogger("dossier.workspace.staleness")

# The principal the re-check acts as, in the scope of the event that caused it.
PRINCIPAL = "workspace:staleness"
# The successor's passages the search ranks first that are read and scored, when the cited locator is gone.
SEARCH_PASSAGES = 3
MAX_QUERY_TERMS = 12


class ClaimRecheck:
    def __init__(self, bus: Callable[[], BusClient], *, timeout: float):
        # The bus exists only once the runtime has connected, so it is looked up at call time.
        self._bus = bus
        self._timeout = timeout

    @consumes(c.EVT_CITATION_CHANGED)
    async def on_citation_changed(self, ctx: EventContext, changed: c.CitationChanged) -> None:
        """Inside the consumer's transaction (its inbox row); `ctx.conn` is not used: the work is the owners'."""
        actor = Actor(scope=ctx.scope, principal=PRINCIPAL)
        claims = await self.fetch_claims_of(actor, changed.publication)
        marks = []
        for index, claim in enumerate(claims):
            if changed.ref not in claim.refs:
                continue
            support_now = None
            if changed.now is not None and changed.now.kind == "source":
                support_now = await self._recheck(actor, claim, changed.ref, changed.now)
            stale = p.Stale(ref=changed.ref, reason=changed.reason, now=changed.now, support_now=support_now)
            marks.append(p.StaleMark(index=index, stale=stale))
        if marks:
            await self.store_stale_marks(actor, changed.publication, marks)

    async def fetch_claims_of(self, actor: Actor, publication: Ref) -> list[p.Claim]:
        """Every claim of the version, in order; none when the version is not served (withdrawn or gone)."""
        assert publication.version is not None
        claims: list[p.Claim] = []
        cursor = None
        while True:
            request = p.ClaimsRequest(id=publication.id, version=publication.version, limit=PAGE, cursor=cursor)
            try:
                page = await self._bus().call(p.CLAIMS, request, actor=actor, timeout=self._timeout)
            except (NotFound, Unavailable):
                return []
            claims += page.items
            cursor = page.next_cursor
            if not cursor:
                return claims

    async def _recheck(self, actor: Actor, claim: p.Claim, cited: Ref, now: Ref) -> Support | None:
        """The claim's support by the successor's text; None when the successor cannot be read now (say it was
        itself superseded meanwhile: its own change is announced and re-checked in turn)."""
        words = checked_words(claim)
        position = claim.refs.index(cited)
        locator = claim.locators[position] if position < len(claim.locators) else None
        texts = await self.fetch_successor_passages(actor, now, locator, words)
        if texts is None:
            return None
        return grade(max((support_score(words, text) for text in texts), default=0.0))

    async def fetch_successor_passages(
        self, actor: Actor, now: Ref, locator: str | None, words: str
    ) -> list[str] | None:
        """The successor's passage at `locator`, else the passages of that version the search ranks first."""
        assert now.version is not None
        if locator:
            try:
                return [await self._locate(actor, now, locator)]
            except NotFound:
                pass  # the successor has no passage there: look for the best matching one
            except Unavailable:
                return None
        terms = list(dict.fromkeys(tokens(words)))[:MAX_QUERY_TERMS]
        if not terms:
            return []
        search = a.SearchRequest(q=" ".join(terms), source_id=now.id, limit=SEARCH_PASSAGES * 3)
        hits = (await self._bus().call(a.SEARCH, search, actor=actor, timeout=self._timeout)).items
        texts = []
        for hit in [h for h in hits if h.version == now.version][:SEARCH_PASSAGES]:
            try:
                texts.append(await self._locate(actor, now, hit.locator))
            except (NotFound, Unavailable):
                continue
        return texts

    async def _locate(self, actor: Actor, now: Ref, locator: str) -> str:
        assert now.version is not None
        request = a.LocateRequest(source_id=now.id, version=now.version, locator=locator)
        return (await self._bus().call(a.LOCATE, request, actor=actor, timeout=self._timeout)).text

    async def store_stale_marks(self, actor: Actor, publication: Ref, marks: list[p.StaleMark]) -> None:
        assert publication.version is not None
        request = p.MarkStaleRequest(id=publication.id, version=publication.version, marks=marks)
        try:
            await self._bus().call(p.MARK_STALE, request, actor=actor, timeout=self._timeout)
        except NotFound:
            log.warning("%s@%s is gone: its claims' change is not kept", publication.id, publication.version)
