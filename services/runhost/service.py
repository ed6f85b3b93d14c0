"""Runhost's rules on the request side: idempotent admission with a frozen snapshot, queries, cancel."""

from __future__ import annotations

import logging
import uuid

import asyncpg

from services.runhost.actor_runs import ActorRuns
from services.runhost.admission_key import admission_digest, same_request
from services.runhost.admitted import AdmittedRun, Limits
from services.runhost.attempt import RunAttempts
from services.runhost.catalog import RunCatalog
from services.runhost.events import emit
from services.runhost.external import ExternalRuns
from services.runhost.memory import validate_path
from services.runhost.owners import Owners
from services.runhost.policies.factory import validate_model
from services.runhost.prov import run_prov
from services.runhost.repository import WAKE_CHANNEL
from shared import tracing
from shared.bus import RequestContext, answers
from shared.contracts import runhost as c
from shared.contracts import workspace as ws
from shared.contracts.common import Actor, Ref
from shared.contracts.workspace import Catalog
from shared.db import Database
from shared.errors import Conflict, DomainError, Forbidden, Invalid, NotFound, TooLarge, too_long
from shared.paging import Int64, cut_page, decode_cursor
from shared.settings import RunhostSettings

log = logging.getLogger("dossier.runhost")


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex}"


class RunService:
    def __init__(
        self,
        *,
        db: Database,
        attempts: RunAttempts,
        external: ExternalRuns,
        owners: Owners,
        settings: RunhostSettings,
    ):
        """`external`: the runs an outside agent drives, which begin at admission and end at a cancel here."""
        self._db, self._owners, self._settings = db, owners, settings
        self._attempts, self._external = attempts, external

    @answers(c.ADMIT)
    async def admit(self, ctx: RequestContext, req: c.AdmitRequest) -> c.AdmitReply:
        if req.driver == "external":
            # The outside agent is the model; a policy named beside it would never run.
            if req.model is not None and req.model != "external":
                raise Invalid("an external run has no model of the run host's", {"field": "model"})
            model = "external"
        else:
            if req.lease_seconds is not None:
                raise Invalid("lease_seconds is for runs with driver external", {"field": "lease_seconds"})
            if req.agent is not None:
                raise Invalid("an agent drives only runs with driver external", {"field": "agent"})
            model = validate_model(req.model or self._settings.model, self._settings)
        runs = ActorRuns(ctx.actor)
        async with self._db.transaction() as conn:
            await runs.lock_request(conn, request_id=req.request_id)
            existing = await runs.find_by_request(conn, request_id=req.request_id)
            if existing is not None:
                if not same_request(existing.params_hash, req, model):
                    raise Conflict("the request_id was used with other parameters", {"run_id": existing.id})
                return c.AdmitReply(run=existing.to_contract(), created=False)
            await self._check_history(ctx.actor, req.history)
            conversation_id = await self._conversation(conn, runs, req)
            run_id = new_id("run")
            snapshot = await self._owners.fetch_admission_snapshot(
                ctx.actor, workspace_id=req.workspace_id, run_id=run_id
            )
            run = await runs.insert_run(
                conn,
                values={
                    "id": run_id,
                    "principal": ctx.actor.principal,
                    "workspace_id": req.workspace_id,
                    "conversation_id": conversation_id,
                    "request_id": req.request_id,
                    "params_hash": admission_digest(req, model),
                    "status": "admitted",
                    "question": req.question,
                    "model": model,
                    "goal_version": snapshot.goal.version,
                    "goal_text": snapshot.goal.text,
                    "catalog": snapshot.catalog.model_dump(mode="json"),
                    "catalog_as_of": snapshot.catalog_as_of,
                    "history": [h.model_dump() for h in req.history],
                    "limits": self._limits(req.limits).model_dump(),
                    "driver": req.driver,
                    "agent": req.agent.model_dump() if req.agent is not None else None,
                    # Every attempt of the run continues the admission's trace (services/runhost/worker.py).
                    "trace_headers": tracing.current_headers(),
                },
            )
            await emit(conn, c.EVT_ADMITTED, run)
            if req.driver == "external":
                lease_seconds = req.lease_seconds or c.LEASE_SECONDS_DEFAULT
                reply = await self._external.begin(conn, run, lease_seconds)
            else:
                await conn.execute(f"NOTIFY {WAKE_CHANNEL}")
                reply = run.to_contract()
        await self._associate_run(ctx.actor, run)
        return c.AdmitReply(run=reply, created=True)

    def _limits(self, asked: c.RunLimits | None) -> Limits:
        s, a = self._settings, asked or c.RunLimits()
        return Limits(
            max_steps=min(a.max_steps or s.run_max_steps, s.run_max_steps),
            max_chars=min(a.max_chars or s.run_max_chars, s.run_max_chars),
            max_seconds=min(a.max_seconds or s.run_max_seconds, s.run_max_seconds),
            max_model_requests=min(a.max_model_requests or s.run_max_model_requests, s.run_max_model_requests),
        )

    async def _check_history(self, actor: Actor, history: list[c.HistoryRef]) -> None:
        """Every selected version must exist in this scope (a withdrawn one still exists: the run records it)."""
        if not history:
            return
        refs = [Ref(kind="publication", id=h.publication_id, version=h.version) for h in history]
        for i, item in enumerate(await self._owners.check_publications(actor, refs)):
            if item.reason == "not_found":
                h = history[i]
                raise NotFound(f"{h.publication_id}@{h.version} does not exist", {"field": f"history.{i}"})

    async def _conversation(self, conn: asyncpg.Connection, runs: ActorRuns, req: c.AdmitRequest) -> str:
        if req.conversation_id is None:
            conversation_id = new_id("conv")
            await runs.insert_conversation(conn, id=conversation_id, workspace_id=req.workspace_id)
            return conversation_id
        conv = await runs.get_conversation(conn, id=req.conversation_id)
        if conv is None or conv["workspace_id"] != req.workspace_id:
            raise NotFound("conversation not found", {"field": "conversation_id"})
        return req.conversation_id

    async def _associate_run(self, actor: Actor, run: AdmittedRun) -> None:
        """The workspace records the conversation; a failure here never undoes the admitted run."""
        try:
            request = ws.AssociateRequest(
                workspace_id=run.workspace_id, kind="conversation", ref_id=run.conversation_id, run_id=run.id
            )
            await self._owners.associate_with_workspace(actor, request)
        except DomainError as exc:
            log.warning("could not associate conversation %s: %s", run.conversation_id, exc.message)

    async def _scoped_run(self, conn: asyncpg.Connection, runs: ActorRuns, run_id: str) -> AdmittedRun:
        run = await runs.get_run(conn, id=run_id)
        if run is None:
            raise NotFound("run not found", {"id": run_id})
        return run

    @answers(c.GET_RUN)
    async def get(self, ctx: RequestContext, req: c.RunIdRequest) -> c.Run:
        async with self._db.statement() as conn:
            return (await self._scoped_run(conn, ActorRuns(ctx.actor), req.run_id)).to_contract()

    @answers(c.LIST_RUNS)
    async def list_runs(self, ctx: RequestContext, req: c.ListRunsRequest) -> c.RunList:
        # A workspace route: a deleted workspace answers 404 here too, although its runs live on.
        await self._owners.ensure_workspace_exists(ctx.actor, workspace_id=req.workspace_id)
        async with self._db.statement() as conn:
            page, next_cursor = await ActorRuns(ctx.actor).list_runs(conn, workspace_id=req.workspace_id, page=req)
        return c.RunList(items=[r.to_contract() for r in page], next_cursor=next_cursor)

    @answers(c.CANCEL)
    async def cancel(self, ctx: RequestContext, req: c.RunIdRequest) -> c.Run:
        ended = await self._external.cancel(ctx.actor, req.run_id)
        if ended is not None:
            return ended
        runs = ActorRuns(ctx.actor)
        async with self._db.transaction() as conn:
            run = await self._scoped_run(conn, runs, req.run_id)
            if run.status == "admitted":
                cancelled = await runs.cancel_unclaimed(conn, id=req.run_id)
                if cancelled is not None:
                    await emit(conn, c.EVT_CANCELLED, cancelled)
                    return cancelled.to_contract()
            if run.status in ("admitted", "running"):
                # The worker that holds the lease ends the run at its next step.
                run = await runs.request_cancel(conn, id=req.run_id) or run
            return run.to_contract()

    @answers(c.RUN_CATALOG)
    async def catalog(self, ctx: RequestContext, req: c.RunCatalogRequest) -> Catalog:
        """A run's catalog as admitted, for a person: the run's own reads are not recorded by it. An outside
        agent's run is read by its agent, with its lease (each page is a step of that run)."""
        async with self._db.statement() as conn:
            run = await self._scoped_run(conn, ActorRuns(ctx.actor), req.run_id)
        if run.driver == "external":
            raise Forbidden(
                "an external run's catalog is read with the run's lease, in X-Run-Lease", {"header": "X-Run-Lease"}
            )
        return await RunCatalog(run, self._owners).page(req.cursor)

    @answers(c.GET_CONVERSATION)
    async def conversation(self, ctx: RequestContext, req: c.ConversationRequest) -> c.Conversation:
        runs = ActorRuns(ctx.actor)
        async with self._db.statement() as conn:
            conv = await runs.get_conversation(conn, id=req.conversation_id)
            if conv is None:
                raise NotFound("conversation not found", {"id": req.conversation_id})
            page, next_cursor = await runs.list_conversation_runs(conn, conversation_id=req.conversation_id, page=req)
        return c.Conversation(
            id=conv["id"],
            workspace_id=conv["workspace_id"],
            runs=[c.ConversationRun(**dict(r)) for r in page],
            next_cursor=next_cursor,
        )

    @answers(c.LEDGER)
    async def ledger(self, ctx: RequestContext, req: c.RunPageRequest) -> c.Ledger:
        after_id, after_seq = decode_cursor(req.cursor, Int64, Int64) if req.cursor else (0, 0)
        runs = ActorRuns(ctx.actor)
        async with self._db.statement() as conn:
            await self._scoped_run(conn, runs, req.run_id)
            rows = await runs.page_ledger(
                conn, run_id=req.run_id, limit=req.limit + 1, after_id=after_id, after_seq=after_seq
            )
            totals = await runs.ledger_totals(conn, run_id=req.run_id)
        page, next_cursor = cut_page(rows, req.limit, lambda r: (r["id"], r["seq"]))
        items = [c.LedgerRow(**{k: v for k, v in r.items() if k != "id"}) for r in page]
        return c.Ledger.model_validate({"items": items, "next_cursor": next_cursor, "totals": totals})

    @answers(c.STEP)
    async def step(self, ctx: RequestContext, req: c.StepRequest) -> c.ModelSteps:
        """The journal rows of one model request (none for a run no model drove, or a request it never made)."""
        request_id = req.request_id if ":" in req.request_id else f"{req.run_id}:{req.request_id}"
        runs = ActorRuns(ctx.actor)
        async with self._db.statement() as conn:
            await self._scoped_run(conn, runs, req.run_id)
            rows = await runs.journal_rows(conn, run_id=req.run_id, request_id=request_id)
        return c.ModelSteps(
            items=[
                c.ModelStep(
                    request_id=row["request_id"],
                    epoch=row["epoch"],
                    response=dict(row["response"] or {}),
                    results=list((row["result"] or {}).get("batch", [row["result"]] if row["result"] else [])),
                    created_at=row["created_at"],
                )
                for row in rows
            ]
        )

    @answers(c.PROV)
    async def prov(self, ctx: RequestContext, req: c.RunIdRequest) -> c.ProvDocument:
        runs = ActorRuns(ctx.actor)
        async with self._db.statement() as conn:
            run = await self._scoped_run(conn, runs, req.run_id)
            rows = await runs.list_ledger(conn, run_id=req.run_id)
            epochs = await runs.lease_epochs(conn, run_id=req.run_id) if run.driver == "external" else []
        return run_prov(run, rows, epochs)

    @answers(c.LIST_FILES)
    async def list_files(self, ctx: RequestContext, req: c.RunPageRequest) -> c.FileList:
        runs = ActorRuns(ctx.actor)
        async with self._db.statement() as conn:
            run = await self._scoped_run(conn, runs, req.run_id)
            page, next_cursor = await runs.page_files(conn, run_id=req.run_id, page=req)
        items = [c.FileEntry(path=r["path"], size=r["size"]) for r in page]
        return c.FileList(items=items, next_cursor=next_cursor, released_at=run.files_released_at)

    @answers(c.READ_FILE)
    async def read_file(self, ctx: RequestContext, req: c.ReadFileRequest) -> c.FileText:
        validate_path(req.path)
        async with self._db.statement() as conn:
            run = await self._scoped_run(conn, ActorRuns(ctx.actor), req.run_id)
        if run.files_released_at is not None:
            released = run.files_released_at.isoformat().replace("+00:00", "Z")
            details = {"path": req.path, "released_at": released}
            raise NotFound("the run's working files were let go after its retention period", details)
        return c.FileText(path=req.path, text=await self._attempts.files(req.run_id).read(req.path))

    @answers(c.WRITE_PLAN)
    async def write_plan(self, ctx: RequestContext, req: c.WritePlanRequest) -> None:
        size = len(req.text.encode("utf-8"))
        if size > self._settings.max_plan_bytes:
            limit = self._settings.max_plan_bytes
            raise TooLarge(too_long("the plan", size, limit, "bytes (UTF-8)"), {"limit": limit, "size": size})
        async with self._db.statement() as conn:
            run = await self._scoped_run(conn, ActorRuns(ctx.actor), req.run_id)
        if run.status not in ("admitted", "running"):
            raise Conflict("the run is finished; its plan can no longer change", {"status": run.status})
        if not req.text.strip():
            raise Invalid("the plan is empty", {"field": "body"})
        await self._attempts.files(req.run_id).write("plan.md", req.text)
