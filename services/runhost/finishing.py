"""How a run ends: win the run, publish (idempotent), associate, propose the checkpoint, retain the report, record.

A run's end is decided once, in one transaction on the run row (`win`): the answer is kept, with the
`included` rows of what it cites, only under the current epoch, while the run is running, no finish has won
it and no cancel was asked for. A cancel or a take-over locks the same row and loses against a kept answer
(services/runhost/external.py), so a finish that wins cannot be undone and a finish that loses has written
nothing and publishes nothing.

Each later step can be repeated by whoever finishes the run from the kept answer (a worker that took the
run over, an outside agent repeating its finish, the sweep of interrupted finishes): the publication is
committed with the request key `run:<run_id>`, so a retried finish never makes a second publication, and
every step leaving the service is preceded by a fence check, so a stale worker stops at the next.
"""

from __future__ import annotations

import hashlib
import logging
from datetime import UTC, datetime
from typing import Any

import asyncpg
from pydantic import ValidationError

from services.runhost.admitted import AdmittedRun, Proposal
from services.runhost.availability import withhold_unusable
from services.runhost.claims import check_answer, claim_counts
from services.runhost.events import emit
from services.runhost.leases import StaleLease
from services.runhost.ledger import Inclusion, RunLedger
from services.runhost.memory import RunFiles
from services.runhost.owners import Owners
from services.runhost.report import render_report
from services.runhost.repository import WorkerRuns
from shared.blobs import Blobs, content_key
from shared.contracts import artifact
from shared.contracts import publication as pub
from shared.contracts import runhost as c
from shared.contracts import workspace as ws
from shared.contracts.common import EventType, PublicationRef, Ref
from shared.db import Database
from shared.errors import DomainError, NotFound

log = logging.getLogger("dossier.runhost")


class Finisher:
    def __init__(
        self,
        *,
        db: Database,
        repo: WorkerRuns,
        owners: Owners,
        blobs: Blobs,
        run: AdmittedRun,
        epoch: int,
        files: RunFiles,
        ledger: RunLedger,
    ):
        """`files` and `ledger`: the run's, fenced by `epoch` (services/runhost/attempt.py makes them together)."""
        self.db, self.repo, self.owners, self.blobs = db, repo, owners, blobs
        self.run, self.epoch, self.files, self.ledger = run, epoch, files, ledger
        self.actor = run.actor

    async def _fenced(
        self,
        values: dict[str, Any],
        *,
        event: EventType[c.RunEvent] | None = None,
        publication: PublicationRef | None = None,
        error: str | None = None,
    ) -> None:
        async with self.db.transaction() as conn:
            if not await self.repo.fenced_update(conn, run_id=self.run.id, epoch=self.epoch, values=values):
                raise StaleLease(self.run.id)
            if event is not None:
                await emit(conn, event, self.run, publication=publication, error=error)

    async def _check_fence(self) -> None:
        async with self.db.statement() as conn:
            if not await self.repo.holds_lease(conn, run_id=self.run.id, epoch=self.epoch):
                raise StaleLease(self.run.id)

    async def consumed_sources(self) -> list[Ref]:
        async with self.db.statement() as conn:
            rows = await self.repo.included_refs(conn, run_id=self.run.id)
        return [Ref.model_validate(r["ref"]) for r in rows]

    async def win(
        self, kept: dict[str, Any], cited: list[Inclusion] | None = None, gone: dict[str, str] | None = None
    ) -> bool:
        """Keep the answer (`kept`: final_answer and what goes with it) and make what it cites `included` rows
        (those in `gone`, withdrawn or retired since they were read, `unavailable` rows with that reason), in one
        transaction, if this finish wins the run; false, with nothing written, if it does not."""
        async with self.db.transaction() as conn:
            won = await self.win_in(conn, kept, cited, gone)
        if won:
            self.run = self.run.model_copy(update=kept)
        return won

    async def win_in(
        self,
        conn: asyncpg.Connection,
        kept: dict[str, Any],
        cited: list[Inclusion] | None = None,
        gone: dict[str, str] | None = None,
    ) -> bool:
        """`win` inside the caller's transaction (which has nothing else to undo if the run is not won); the
        caller keeps `kept` on `self.run` once it has committed."""
        gone = gone or {}
        if not await self.repo.claim_end(conn, run_id=self.run.id, epoch=self.epoch, values=kept):
            return False
        for item in cited or []:
            fields = {"content_hash": item.content_hash, "locator": item.locator, "model_request": "answer"}
            reason = gone.get(item.ref.key())
            stage = "included" if reason is None else "unavailable"
            if not await self.ledger.append_in(conn, stage, item.ref, **fields, reason=reason):
                raise StaleLease(self.run.id)
        return True

    async def complete(self, answer: str, proposal: dict[str, Any] | None) -> None:
        if self.run.final_answer is None:
            # A version withdrawn or retired since it was read supports nothing: recorded so before the answer
            # is kept, so it is neither an `included` row nor among the publication's sources.
            await withhold_unusable(self.owners, self.ledger, self.actor, await self.consumed_sources())
            if not await self.win({"final_answer": answer, "final_proposal": proposal}):
                async with self.db.statement() as conn:
                    cancel = await self.repo.cancel_state(conn, run_id=self.run.id, epoch=self.epoch)
                if cancel:
                    # Asked for before the answer was kept: the cancel won, and nothing is published.
                    await self.cancelled()
                    return
                raise StaleLease(self.run.id)
        await self.resume_finish()

    async def resume_finish(self) -> None:
        """Every finishing step, from the kept answer; safe to repeat from the start by a later worker."""
        answer, proposal = self.run.final_answer, self.run.final_proposal
        if answer is None:
            raise RuntimeError(f"run {self.run.id} has no kept answer to finish with")
        sources = await self.consumed_sources()
        claims = await check_answer(self.db, self.repo, self.files, answer)
        # The answer is titled by its question, as a person would (or as an outside agent asked); the
        # report file names its run (see below).
        title = self.run.answer_title
        request = pub.CommitRequest(
            claims=claims,
            title=title,
            body=answer,
            workspace_id=self.run.workspace_id,
            run_id=self.run.id,
            evidence_since=self.run.started_at,
            sources=sources,
            request_key=f"run:{self.run.id}",
        )
        await self._check_fence()
        published = await self.owners.publish_answer(self.actor, request)
        publication = PublicationRef(id=published.id, version=published.version)
        await self._fenced(
            {"publication_id": published.id, "publication_version": published.version} | claim_counts(claims)
        )
        association = await self._associate(published)
        await self._check_fence()
        checkpoint = await self._propose(proposal, publication, sources)
        await self._check_fence()
        report = await self._retain_report(f"{c.REPORT_TITLE_PREFIX}{self.run.id}: {title}", answer)
        result = {
            "report_artifact_id": report,
            "workspace_association": association,
            "checkpoint_proposal": checkpoint.model_dump(),
            "status": "completed",
            "finished_at": datetime.now(UTC),
        }
        await self._fenced(result, event=c.EVT_COMPLETED, publication=publication)

    async def _associate(self, published: pub.PublicationVersion) -> str:
        request = ws.AssociateRequest(
            workspace_id=self.run.workspace_id,
            kind="publication",
            ref_id=published.id,
            version=published.version,
            run_id=self.run.id,
            # With its title: this may come before `publication.committed`, which carries it too.
            title=published.title,
        )
        try:
            reply = await self.owners.associate_with_workspace(self.actor, request)
        except NotFound:
            return "refused"
        except DomainError as exc:
            log.warning("run %s: association pending (%s)", self.run.id, exc.message)
            return "pending"
        return reply.association

    async def _propose(
        self, proposal: dict[str, Any] | None, publication: PublicationRef, sources: list[Ref]
    ) -> c.CheckpointProposalResult:
        """An invalid or missing proposal never fails an otherwise valid run."""
        if proposal is None:
            return c.CheckpointProposalResult(status="none")
        try:
            valid = Proposal.model_validate(proposal)
            payload = ws.ProposeRequest(
                **valid.model_dump(),
                workspace_id=self.run.workspace_id,
                derived_from=ws.DerivedFrom(
                    run_id=self.run.id,
                    publication=publication,
                    sources=sources,
                ),
                # The workspace resolves the open questions this run was asked and answered.
                question=self.run.question,
            )
        except ValidationError:
            return c.CheckpointProposalResult(status="invalid")
        try:
            reply = await self.owners.propose_checkpoint(self.actor, payload)
        except DomainError as exc:
            log.warning("run %s: checkpoint proposal not applied (%s)", self.run.id, exc.message)
            return c.CheckpointProposalResult(status="stale")
        return c.CheckpointProposalResult(status=reply.result, revision=reply.revision)

    async def _retain_report(self, title: str, answer: str) -> str | None:
        """The HTML report is retained as an artifact and pinned (as the run's: no catalog item); its id, or
        None: its failure is logged, not fatal."""
        data = render_report(title, answer, run_id=self.run.id).encode("utf-8")
        digest = hashlib.sha256(data).hexdigest()
        key = content_key(digest)
        try:
            await self.blobs.put_bytes(key, data, content_type="text/html; charset=utf-8")
            blob = artifact.RegisterRequest(
                bucket=self.blobs.bucket,
                key=key,
                sha256=digest,
                size=len(data),
                title=title,
                media_type="text/html",
            )
            registered = await self.owners.register_report_artifact(self.actor, blob)
            await self.owners.pin_report_artifact(
                self.actor, workspace_id=self.run.workspace_id, artifact_id=registered.id, run_id=self.run.id
            )
        except (DomainError, OSError) as exc:
            log.warning("run %s: report artifact not retained (%s)", self.run.id, exc)
            return None
        return registered.id

    async def cancelled(self) -> None:
        await self._fenced({"status": "cancelled", "finished_at": datetime.now(UTC)}, event=c.EVT_CANCELLED)

    async def failed(self, error: str, details: dict[str, Any] | None = None) -> None:
        """`details` go with an error that is a code (`limit_reached`: which limit)."""
        values = {"status": "failed", "error": error[:2000], "finished_at": datetime.now(UTC)}
        if details is not None:
            values["error_details"] = details
        await self._fenced(values, event=c.EVT_FAILED, error=error)
