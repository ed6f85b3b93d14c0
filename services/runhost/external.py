"""Runs driven by an outside agent: the agent's calls become the run's steps, through the run host's own
tools, grant, ledger, files and finishing, under a lease the agent holds by a secret token.

The token is shown once (admission, take-over) and kept only as its SHA-256, one per epoch
(services/runhost/leases.py). Every call checks it against the run: unknown → forbidden; an older
epoch's → conflict naming the current epoch; expired → conflict. Every write below that check is fenced by the epoch in SQL, as a worker's are, so
after a take-over exactly one session's writes land. Every call is also held to the run's limits
(services/runhost/limits.py).
"""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime

import asyncpg

from services.runhost import leases
from services.runhost.actor_runs import ActorRuns
from services.runhost.admitted import AdmittedRun
from services.runhost.attempt import RunAttempt, RunAttempts
from services.runhost.availability import unusable
from services.runhost.claims import check_reads
from services.runhost.events import emit
from services.runhost.external_repository import ExternalRepository
from services.runhost.finishing import Finisher
from services.runhost.leases import StaleLease, new_token, token_hash
from services.runhost.ledger import Inclusion
from services.runhost.limits import AgentLimits
from services.runhost.memory import provenance_of, validate_path
from services.runhost.owners import Owners
from services.runhost.policies.vocabulary import ToolCall, ToolResult
from services.runhost.repository import WorkerRuns
from services.runhost.search import Asked
from shared import tracing
from shared.bus import RequestContext, answers
from shared.contracts import runhost as c
from shared.contracts.common import Actor, Ref
from shared.contracts.workspace import Catalog
from shared.db import Database
from shared.errors import Conflict, DomainError, Invalid, NotFound, TooLarge, Unavailable, too_long
from shared.settings import RunhostSettings

log = logging.getLogger("dossier.runhost.external")
MAX_WRITE_BYTES = 1024 * 1024
ABANDONED = "abandoned"
# How long a take-over waits for a finish under way to win or fail: a few seconds, well inside the bus
# request timeout of whoever asked for the take-over (DOSSIER_REQUEST_TIMEOUT, 5 s by default).
TAKE_WAITS_FOR_FINISH_SECONDS = 3.0
# The longest a run's time-limit sweep waits between two looks.
DEADLINE_SWEEP_SECONDS = 5.0


def writable(path: str) -> str:
    """An outside agent writes its plan, its draft and its notes; sources/ are the run host's copies."""
    validate_path(path)
    if not (path in ("plan.md", "draft.md") or path.startswith("notes/")):
        raise Invalid("an outside agent may write plan.md, draft.md and notes/<name>.md", {"field": "path"})
    return path


class ExternalRuns:
    def __init__(
        self,
        *,
        db: Database,
        repo: WorkerRuns,
        attempts: RunAttempts,
        owners: Owners,
        settings: RunhostSettings,
    ):
        self.db, self.repo, self.attempts, self.owners, self.settings = db, repo, attempts, owners, settings
        self.leases = ExternalRepository()
        self.limits = AgentLimits(db=db, repo=repo, leases=self.leases)

    async def begin(self, conn: asyncpg.Connection, admitted: AdmittedRun, lease_seconds: int) -> c.Run:
        """Inside the admission's transaction: the run starts under epoch 1; the reply shows the token."""
        token, digest = new_token()
        run = await self.leases.start_lease(
            conn, run_id=admitted.id, token_hash=digest, lease_seconds=lease_seconds, holder=admitted.principal
        )
        await emit(conn, c.EVT_STARTED, run)
        reply = run.to_contract()
        if run.lease_expires_at is not None:
            reply.lease = c.Lease(token=token, epoch=1, expires_at=run.lease_expires_at)
        return reply

    async def _session(
        self, actor: Actor, run_id: str, token: str, *, finishing: bool = False, step: bool = True, chars: int = 0
    ) -> RunAttempt:
        """The run's attempt under the epoch of `token` (services/runhost/attempt.py), if that token's session
        may act on it now, with the call counted as a step of the run (`step`; `chars`: what it writes) under the
        run's limits (services/runhost/limits.py).
        Once a finish has won the run, only a finish goes on (repeated after a crash, even past the lease:
        nothing can take the run over any more); every other call is refused."""
        refusal: DomainError | None = None
        async with self.db.transaction() as conn:
            locked = await ActorRuns(actor).lock_run(conn, id=run_id)
            if locked is None:
                raise NotFound("run not found", {"id": run_id})
            run, now = locked
            epoch = await self.leases.token_epoch(conn, run_id=run_id, token_hash=token_hash(token))
            if epoch is None:
                raise leases.not_the_token()
            if run.status != "running":
                raise leases.not_running(run.status, run.error, run.error_details)
            if epoch != run.lease_epoch:
                raise leases.superseded(run.lease_epoch)
            if run.final_answer is not None:
                if not finishing:
                    raise leases.finishing()
                return self.attempts.attempt(run)
            # A refusal that ends the run (a limit) commits with it, so it is raised once the transaction is done.
            refusal = await self.limits.check_in(conn, run, now, step=step, chars=chars)
        if refusal is not None:
            raise refusal
        return self.attempts.attempt(run)

    async def _tool(self, attempt: RunAttempt, name: str, **arguments: object) -> ToolResult:
        await attempt.ledger.load()
        try:
            result, _ = await attempt.toolbox.dispatch(ToolCall(name, arguments, call_id=f"external:{name}"))
        except StaleLease:
            raise await self._superseded(attempt.run) from None
        return result

    @answers(c.EXTERNAL_CATALOG)
    async def catalog(self, ctx: RequestContext, req: c.ExternalCatalogRequest) -> Catalog:
        """A page of the catalog as admitted (the first without a cursor), through the run's own tool."""
        attempt = await self._session(ctx.actor, req.run_id, req.lease)
        arguments = {} if req.cursor is None else {"cursor": req.cursor}
        result = await self._tool(attempt, "list_catalog", **arguments)
        await self.limits.charge(attempt.run, attempt.epoch, chars=len(result.text))
        return result.value_as(Catalog)

    @answers(c.EXTERNAL_SEARCH)
    async def search(self, ctx: RequestContext, req: c.ExternalSearchRequest) -> c.ExternalSearch:
        """A page of at most `limit` hits: the passages first, then the earlier publications of the workspace
        the search found, and the cursor of the next page (services/runhost/search.py); exactly the hits
        answered are recorded as `listed`."""
        attempt = await self._session(ctx.actor, req.run_id, req.lease)
        await attempt.ledger.load()
        try:
            found = await attempt.toolbox.search(Asked(req.q, req.limit, req.cursor, in_all=True))
        except StaleLease:
            raise await self._superseded(attempt.run) from None
        items = [
            c.RunSearchHit(
                evidence_id=h.evidence_id,
                ref=Ref(kind="source", id=h.source_id, version=h.version),
                locator=h.locator,
                snippet=h.snippet,
            )
            for h in found.passages
        ] + [
            c.RunSearchHit(
                evidence_id=None,
                ref=Ref(kind="publication", id=p.id, version=p.version),
                locator=None,
                snippet=p.snippet,
            )
            for p in found.publications
        ]
        await self.limits.charge(attempt.run, attempt.epoch, chars=sum(len(item.snippet) for item in items))
        return c.ExternalSearch(items=items, next_cursor=found.next_cursor)

    @answers(c.EXTERNAL_READ)
    async def read(self, ctx: RequestContext, req: c.ExternalReadRequest) -> c.ExternalRead:
        attempt = await self._session(ctx.actor, req.run_id, req.lease)
        ref = req.ref
        if ref.kind == "publication":
            if ref.version is None:
                raise Invalid("a publication is read at an exact version", {"field": "ref.version"})
            result = await self._tool(attempt, "read_publication", id=ref.id, version=ref.version)
        elif ref.kind == "evidence":
            result = await self._tool(attempt, "read_evidence", evidence_id=ref.id)
        else:
            raise Invalid(
                "read a publication at its version, or an evidence passage by the evidence_id search gave",
                {"field": "ref.kind"},
            )
        read = result.value_as(c.SourceRead)
        if not result.ok:
            reason = read.reason or "not_found"
            if reason == "not_found":
                # The tool's words say how this run reaches an item it may not read yet (its own search).
                raise NotFound(result.text.removeprefix("not found: "), {"ref": ref.model_dump()})
            raise Unavailable(f"{ref.kind} {ref.id} cannot be read now", {"reason": reason})
        text, row = await attempt.files.read_indexed(read.path)
        await self.limits.charge(attempt.run, attempt.epoch, chars=len(text), source_chars=read.fresh_chars or 0)
        prov = provenance_of(row) or {}
        return c.ExternalRead(
            ref=read.ref or ref,
            locator=prov.get("locator"),
            content_hash=prov.get("content_hash"),
            text=text,
            path=read.path,
        )

    @answers(c.EXTERNAL_WRITE)
    async def write(self, ctx: RequestContext, req: c.ExternalWriteRequest) -> None:
        """A file of the agent's own; its text counts against the run's `max_chars`, and a plan is bounded as a
        person's edit of it is (DOSSIER_MAX_PLAN_BYTES)."""
        writable(req.path)
        size = len(req.text.encode("utf-8"))
        limit = self.settings.max_plan_bytes if req.path == "plan.md" else MAX_WRITE_BYTES
        if size > limit:
            message = too_long(f"the text of {req.path}", size, limit, "bytes (UTF-8)")
            raise TooLarge(message, {"limit": limit, "size": size})
        attempt = await self._session(ctx.actor, req.run_id, req.lease, chars=len(req.text))
        try:
            await attempt.files.write(req.path, req.text)
        except StaleLease:
            raise await self._superseded(attempt.run) from None

    @answers(c.EXTERNAL_RENEW)
    async def renew(self, ctx: RequestContext, req: c.LeaseRequest) -> c.Lease:
        attempt = await self._session(ctx.actor, req.run_id, req.lease, step=False)
        async with self.db.transaction() as conn:
            row = await self.leases.renew(conn, run_id=attempt.run.id, epoch=attempt.epoch)
        if row is None:
            raise await self._superseded(attempt.run)
        return c.Lease(token=req.lease, epoch=row["lease_epoch"], expires_at=row["lease_expires_at"])

    @answers(c.EXTERNAL_TAKE)
    async def take(self, ctx: RequestContext, req: c.TakeRequest) -> c.TakeReply:
        token, digest = new_token()
        runs = ActorRuns(ctx.actor)
        async with self.db.statement() as conn:
            seen = await runs.peek_run(conn, id=req.run_id)
        if seen is None:
            raise NotFound("run not found", {"id": req.run_id})
        # What would refuse the take-over anyway is answered before any wait.
        self._may_take(*seen, req.force)
        refusal: DomainError | None = None
        async with self.db.transaction() as conn:
            # A finish under way (its lease checked, the run not yet won) is waited for, a few seconds at most,
            # rather than have its nearly done answer thrown away; then everything is checked again.
            await self.leases.wait_for_finishes(conn, run_id=req.run_id, seconds=TAKE_WAITS_FOR_FINISH_SECONDS)
            locked = await runs.lock_run(conn, id=req.run_id)
            if locked is None:
                raise NotFound("run not found", {"id": req.run_id})
            run, now = locked
            self._may_take(run, now, req.force)
            if run.deadline is not None and run.deadline <= now:
                # Past its time limit the run ends here: a new session would get no time to go on.
                refusal = await self.limits.check_in(conn, run, now, step=False)
            else:
                lease = await self.leases.take(conn, run_id=req.run_id, token_hash=digest, holder=ctx.actor.principal)
        if refusal is not None:
            raise refusal
        files = self.attempts.files(req.run_id, lease["lease_epoch"])
        listing = await files.listing()
        async with self.db.statement() as conn:
            rows = await self.repo.list_files(conn, run_id=req.run_id)
        reads = [
            c.ResumeRead(ref=Ref.model_validate(r["ref"]), locator=r["locator"], path=r["path"])
            for r in rows
            if r["ref"] is not None
        ]
        resume = c.Resume(
            plan=await files.read("plan.md") if "plan.md" in listing else None,
            files=[c.FileEntry(path=p, size=s) for p, s in sorted(listing.items())],
            reads=reads,
        )
        return c.TakeReply(
            lease=c.Lease(token=token, epoch=lease["lease_epoch"], expires_at=lease["lease_expires_at"]),
            resume=resume,
        )

    def _may_take(self, run: AdmittedRun, now: datetime, force: bool) -> None:
        """Refusals of a take-over: a run that is not external or not running, one a finish has won, or (without
        `force`) a lease still held."""
        if run.driver != "external":
            raise leases.not_external(run.driver)
        if run.status != "running":
            raise leases.not_running(run.status, run.error, run.error_details)
        if run.final_answer is not None:
            # A finish won the run: its answer is being published, and no other session's may be.
            raise leases.finishing()
        if run.lease_expires_at is not None and run.lease_expires_at > now and not force:
            raise leases.held(run.lease_expires_at)

    @answers(c.EXTERNAL_FINISH)
    async def finish(self, ctx: RequestContext, req: c.ExternalFinishRequest) -> c.Run:
        """The finish that wins the run keeps its answer, and the cited refs as `included` rows, in one
        transaction on the run row (`Finisher.win`); only then is anything published. A finish that loses (to
        a cancel, a take-over or another finish of the same session) has written nothing and answers 409. A
        repeated finish with the kept answer goes on from it: a retry after a crash publishes once (the
        publication's request key is the run's)."""
        answer = req.answer.strip()
        if not answer:
            raise Invalid("the answer is empty", {"field": "answer"})
        attempt = await self._session(ctx.actor, req.run_id, req.lease, finishing=True)
        run, epoch, finisher = attempt.run, attempt.epoch, attempt.finisher
        try:
            if run.final_answer is None:
                if await self._win(finisher, answer, req):
                    if self.settings.run_step_delay_seconds:
                        # Between the kept answer and the publish: where the crash tests kill the run host.
                        await asyncio.sleep(self.settings.run_step_delay_seconds)
                else:
                    finisher.run = await self._won_by(run, epoch)
            if finisher.run.final_answer != answer:
                raise leases.finishing()
            await finisher.resume_finish()
        except StaleLease:
            # Another finish with this answer may have completed the run first: that is this finish's end too.
            finished = await self._won_by(run, epoch)
            if finished.status != "completed" or finished.final_answer != answer:
                raise await self._superseded(run) from None
        async with self.db.statement() as conn:
            done = await ActorRuns(ctx.actor).get_run(conn, id=run.id)
        if done is None:
            raise NotFound("run not found", {"id": run.id})
        return done.to_contract()

    async def _win(self, finisher: Finisher, answer: str, req: c.ExternalFinishRequest) -> bool:
        """Check what the answer cites and keep it, if this finish wins the run (`Finisher.win_in`). From its
        first statement to its end, this finish's transaction holds the run's finishing lock, so a take-over
        arriving meanwhile waits for it to win or fail (`take`) instead of throwing a nearly done answer away."""
        run = finisher.run
        kept: dict[str, object] = {"final_answer": answer, "final_title": (req.title or "").strip() or None}
        async with self.db.transaction() as conn:
            await self.leases.hold_for_finish(conn, run_id=run.id)
            inclusions = await self._cited(conn, run, answer)
            # A cited version withdrawn or retired since it was read is recorded, not included.
            gone = await unusable(self.owners, run.actor, [item.ref for item in inclusions])
            kept["final_proposal"] = await self._proposal(run, req.checkpoint, answer)
            won = await finisher.win_in(conn, kept, inclusions, gone)
        if won:
            finisher.run = run.model_copy(update=kept)
        return won

    async def _won_by(self, run: AdmittedRun, epoch: int) -> AdmittedRun:
        """The run as it is now, if this epoch still holds it (a finish of this session won it, or completed
        it); a cancel or a take-over that won answers 409."""
        async with self.db.statement() as conn:
            now = await self.repo.get_run(conn, id=run.id)
        if now is None or now.lease_epoch != epoch or now.status not in ("running", "completed"):
            raise await self._superseded(run)
        return now

    async def _cited(self, conn: asyncpg.Connection, run: AdmittedRun, answer: str) -> list[Inclusion]:
        """Every ref the answer cites must be one this run read at that version."""
        rows = await self.repo.list_ledger(conn, run_id=run.id)
        refs, read = await asyncio.to_thread(check_reads, answer, rows)
        return [Inclusion(c.ref, read[c.key]["content_hash"], c.key[3]) for c in refs]

    async def _proposal(
        self, run: AdmittedRun, checkpoint: c.CheckpointUpdate | None, answer: str
    ) -> dict[str, object] | None:
        """The agent's checkpoint update as the run keeps a proposal (`AdmittedRun.final_proposal`)."""
        if checkpoint is None:
            return None
        revision = await self.owners.fetch_checkpoint_revision(run.actor, workspace_id=run.workspace_id)
        summary = (checkpoint.summary or "").strip() or answer[:2000]
        return {"summary": summary, "add_questions": checkpoint.add_questions, "expected_revision": revision}

    async def cancel(self, actor: Actor, run_id: str) -> c.Run | None:
        """An external run has no worker to notice a cancel request: it ends at once, unless a finish has won
        it (its answer is kept, on the same locked row): then the cancel loses and the run completes."""
        async with self.db.transaction() as conn:
            locked = await ActorRuns(actor).lock_run(conn, id=run_id)
            if locked is None or locked[0].driver != "external":
                return None
            run = locked[0]
            if run.status != "running" or run.final_answer is not None:
                return run.to_contract()
            run = await self.leases.cancel_external(conn, id=run_id)
            await emit(conn, c.EVT_CANCELLED, run)
        return run.to_contract()

    async def finish_interrupted(self) -> None:
        """Runs whose finish won but did not complete (the run host died on the way) and whose agent has not
        repeated it within its lease: finished from the kept answer, as the agent's repeat would."""
        async with self.db.statement() as conn:
            runs = await self.leases.interrupted_finishes(conn)
        for run in runs:
            finisher = self.attempts.attempt(run).finisher
            with tracing.continued(run.trace_headers):
                try:
                    await finisher.resume_finish()
                except StaleLease:
                    continue
                except DomainError as exc:
                    log.warning("run %s: its interrupted finish did not complete (%s)", run.id, exc.message)
                    continue
            log.info("run %s: an interrupted finish completed", run.id)

    async def abandon_forever(self, interval: float = 60.0) -> None:
        """External runs whose lease stayed expired for DOSSIER_EXTERNAL_ABANDON_SECONDS fail as abandoned, and
        those past their time limit at it."""
        while True:
            try:
                async with self.db.transaction() as conn:
                    runs = await self.leases.abandon(
                        conn, after_seconds=self.settings.external_abandon_seconds, error=ABANDONED
                    )
                    for run in runs:
                        # The run's end belongs to the trace of its admission, not to this sweep.
                        with tracing.continued(run.trace_headers):
                            await emit(conn, c.EVT_FAILED, run, error=ABANDONED)
                for run in runs:
                    log.info("run %s: abandoned by its outside agent", run.id)
                await self.limits.end_past_deadline()
                await self.finish_interrupted()
            except (OSError, asyncpg.PostgresError, DomainError) as exc:
                log.warning("abandoning expired external runs failed: %s", exc)
            # Often enough that a run past its time limit is seen to have failed within a few seconds.
            pause = min(interval, max(self.settings.external_abandon_seconds / 4, 1.0), DEADLINE_SWEEP_SECONDS)
            await asyncio.sleep(pause)

    async def _superseded(self, run: AdmittedRun) -> Conflict:
        """A write refused by the fence: another session holds a newer epoch (or the run has ended)."""
        async with self.db.statement() as conn:
            now = await self.repo.get_run(conn, id=run.id)
        if now is not None and now.status != "running":
            return leases.not_running(now.status, now.error, now.error_details)
        return leases.superseded(now.lease_epoch if now else None)
