"""The checkpoint: advisory research progress, revised under compare-and-swap, re-validated on every read.

A question closes only when an update resolves it by id; omitting it changes nothing. A run's proposal
also resolves the open questions the run answered, and a question already open is not added again
(services/workspace/questions.py). A summary is shown only while every source it was derived from is
still available from its owner: otherwise the checkpoint reads as `unavailable`, the summary is withheld
and the reasons are listed.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import asyncpg
from pydantic import ValidationError

from services.workspace.drift_repository import DriftRepository
from services.workspace.owners import OWNER_OF_KIND, Owners
from services.workspace.questions import answered_by_run, same_question
from services.workspace.repository import ScopedWorkspaceRepository, WorkspaceRepository
from services.workspace.service import not_found
from shared.bus import RequestContext, answers, validation_details
from shared.contracts import workspace as c
from shared.contracts.common import Actor, Ref
from shared.db import Database, from_row
from shared.errors import Conflict, Invalid, NotFound, TooLarge
from shared.outbox import enqueue
from shared.settings import WorkspaceSettings


class BadProposal(Exception):
    """A proposed change that cannot apply as it is; nothing is written."""

    def __init__(self, reason: str, field: str, *, limit: int | None = None, conflict: bool = False):
        super().__init__(reason)
        self.reason = reason
        self.field = field
        self.limit = limit  # set when the proposal is over a size limit (413 for a person's edit)
        # Set when the change is well-formed but does not fit the checkpoint as it is now (409 for a person's
        # edit): a question id it does not hold, or more open questions than it may have.
        self.conflict = conflict


@dataclass(frozen=True)
class Content:
    summary: str | None
    questions: list[c.Question]
    derived_from: c.DerivedFrom


def new_question_id() -> str:
    return f"q_{uuid.uuid4().hex[:12]}"


def revise_questions(
    current: Sequence[c.Question],
    *,
    add: Sequence[str],
    resolve: Sequence[str],
    max_open: int,
    max_chars: int,
) -> list[c.Question]:
    """Resolve by id, then append new open questions, but none already open (`same_question`). Every question
    not named stays exactly as it was."""
    known = {q.id for q in current}
    unknown = [qid for qid in resolve if qid not in known]
    if unknown:
        raise BadProposal(f"no question has the id {unknown[0]!r}", "resolve_questions", conflict=True)
    for text in add:
        if not text.strip():
            raise BadProposal("a question is empty", "add_questions")
        if len(text) > max_chars:
            raise BadProposal(f"a question is longer than {max_chars} characters", "add_questions")
    closing = set(resolve)
    questions = [q.model_copy(update={"status": "resolved"}) if q.id in closing else q for q in current]
    for text in add:
        if not any(q.status == "open" and same_question(q.text, text) for q in questions):
            questions.append(c.Question(id=new_question_id(), text=text.strip(), status="open"))
    if sum(1 for q in questions if q.status == "open") > max_open:
        raise BadProposal(f"more than {max_open} questions would be open", "add_questions", conflict=True)
    return questions


def check_provenance(derived_from: c.DerivedFrom) -> None:
    """Sources must be exact versions of something an owner can re-check."""
    for i, ref in enumerate(derived_from.sources):
        if ref.kind not in OWNER_OF_KIND:
            raise BadProposal(
                f"a {ref.kind} ref cannot be re-checked; name its source instead", f"derived_from.sources.{i}"
            )
        if ref.version is None:
            raise BadProposal("a source must name its exact version", f"derived_from.sources.{i}")


def provenance_refs(derived_from: c.DerivedFrom) -> list[Ref]:
    refs = list(derived_from.sources)
    if derived_from.publication is not None:
        pub = derived_from.publication
        refs.insert(0, Ref(kind="publication", id=pub.id, version=pub.version))
    return refs


def _content(row: asyncpg.Record | None) -> Content:
    if row is None:
        return Content(summary=None, questions=[], derived_from=c.DerivedFrom())
    return Content(
        summary=row["summary"],
        questions=[c.Question.model_validate(q) for q in row["questions"]],
        derived_from=c.DerivedFrom.model_validate(row["derived_from"]),
    )


class Checkpoints:
    def __init__(
        self, db: Database, owners: Owners, settings: WorkspaceSettings, repo: WorkspaceRepository | None = None
    ):
        self._db = db
        self._owners = owners
        self._settings = settings
        self._repo = repo or WorkspaceRepository()
        self._drifts = DriftRepository()

    # -- reads --------------------------------------------------------------------------------------

    @answers(c.CHECKPOINT_GET)
    async def get(self, ctx: RequestContext, req: c.WorkspaceIdRequest) -> c.Checkpoint:
        workspaces = self._repo.for_scope(ctx.actor.scope)
        async with self._db.statement() as conn:
            await self._require_live(conn, workspaces, req.workspace_id)
            row = await workspaces.latest_checkpoint(conn, workspace_id=req.workspace_id)
        if row is None:
            raise NotFound("the workspace has no checkpoint yet", {"id": req.workspace_id})
        [checkpoint] = await self._present(ctx.actor, [row])
        return checkpoint

    @answers(c.CHECKPOINT_REVISIONS)
    async def revisions(self, ctx: RequestContext, req: c.WorkspacePageRequest) -> c.CheckpointRevisions:
        workspaces = self._repo.for_scope(ctx.actor.scope)
        async with self._db.statement() as conn:
            await self._require_live(conn, workspaces, req.workspace_id)
            page, next_cursor = await workspaces.list_checkpoints(conn, workspace_id=req.workspace_id, page=req)
        return c.CheckpointRevisions(items=await self._present(ctx.actor, page), next_cursor=next_cursor)

    async def _require_live(
        self, conn: asyncpg.Connection, workspaces: ScopedWorkspaceRepository, workspace_id: str
    ) -> None:
        if await workspaces.find_workspace(conn, id=workspace_id) is None:
            raise not_found(workspace_id)

    async def _present(self, actor: Actor, rows: Sequence[asyncpg.Record]) -> list[c.Checkpoint]:
        """Re-validate every source of every revision with its owner: one batch per owner for all rows."""
        contents = [_content(row) for row in rows]
        unique: dict[str, Ref] = {}
        for content in contents:
            for ref in provenance_refs(content.derived_from):
                unique.setdefault(ref.key(), ref)
        verdicts = dict(zip(unique, await self._owners.check_eligibility(actor, list(unique.values())), strict=True))
        checkpoints = []
        for row, content in zip(rows, contents, strict=True):
            missing = [
                c.UnavailableSource(ref=ref, reason=verdicts[ref.key()].reason or "unavailable")
                for ref in provenance_refs(content.derived_from)
                if not verdicts[ref.key()].available
            ]
            checkpoints.append(
                from_row(
                    c.Checkpoint,
                    row,
                    status="unavailable" if missing else "valid",
                    summary=None if missing else content.summary,
                    open_questions=content.questions,
                    derived_from=content.derived_from,
                    unavailable_sources=missing,
                )
            )
        return checkpoints

    # -- writes -------------------------------------------------------------------------------------

    def _check_summary(self, summary: str | None) -> None:
        if summary is None:
            return
        if len(summary.encode("utf-8")) > self._settings.max_summary_bytes:
            limit = self._settings.max_summary_bytes
            raise BadProposal(f"the summary is larger than {limit} bytes", "summary", limit=limit)
        if not summary.strip():
            raise BadProposal("the summary is empty", "summary")

    def _questions(self, previous: Content, add: Sequence[str], resolve: Sequence[str]) -> list[c.Question]:
        return revise_questions(
            previous.questions,
            add=add,
            resolve=resolve,
            max_open=self._settings.max_open_questions,
            max_chars=self._settings.max_question_chars,
        )

    def questions_with(self, previous: Content, text: str) -> list[c.Question]:
        """The previous questions plus one new open question (a drift's), under the same limits."""
        return self._questions(previous, [text], [])

    @answers(c.CHECKPOINT_UPDATE)
    async def update(self, ctx: RequestContext, req: c.UpdateCheckpointRequest) -> c.Checkpoint:
        """A person's edit. A new summary is the person's own, so it derives from nothing."""
        replaces_summary = "summary" in req.model_fields_set

        def build(previous: Content) -> Content:
            if replaces_summary:
                self._check_summary(req.summary)
                return Content(
                    req.summary, self._questions(previous, req.add_questions, req.resolve_questions), c.DerivedFrom()
                )
            questions = self._questions(previous, req.add_questions, req.resolve_questions)
            return Content(previous.summary, questions, previous.derived_from)

        try:
            row = await self._write(ctx.actor, req.workspace_id, req.expected_revision, build, author="user")
        except BadProposal as exc:
            if exc.limit is not None:
                raise TooLarge(exc.reason, {"field": exc.field, "limit": exc.limit}) from exc
            if exc.conflict:
                raise Conflict(exc.reason, {"field": exc.field}) from exc
            raise Invalid(exc.reason, {"field": exc.field}) from exc
        [checkpoint] = await self._present(ctx.actor, [row])
        return checkpoint

    @answers(c.CHECKPOINT_PROPOSE)
    async def propose(self, ctx: RequestContext, raw: c.RawProposal) -> c.ProposeReply:
        """From runhost at the end of a run. Never an error for the proposal: applied, stale or invalid."""
        try:
            req = c.ProposeRequest.model_validate(raw.model_dump(exclude_none=True))
        except ValidationError as exc:
            details = validation_details(exc)
            return c.ProposeReply(result="invalid", revision=None, reason=f"{details['field']}: {details['problem']}")

        async with self._db.statement() as conn:
            drift_refs = await self._drifts.for_scope(ctx.actor.scope).drift_questions(
                conn, workspace_id=req.workspace_id
            )

        def build(previous: Content) -> Content:
            self._check_summary(req.summary)
            check_provenance(req.derived_from)
            answered = answered_by_run(
                previous.questions,
                question=req.question,
                left_open=req.add_questions,
                used={ref.key() for ref in req.derived_from.sources},
                drift_refs=drift_refs,
            )
            resolve = list(dict.fromkeys([*req.resolve_questions, *answered]))
            return Content(req.summary, self._questions(previous, req.add_questions, resolve), req.derived_from)

        try:
            row = await self._write(ctx.actor, req.workspace_id, req.expected_revision, build, author="model")
        except Conflict as exc:
            made = await self._made_by_run(ctx.actor, req)
            if made is not None:
                # The run's finishing steps, repeated by a worker that took the run over: the first attempt's
                # proposal made this revision (a revision is never changed, so it still says so).
                return c.ProposeReply(result="applied", revision=made)
            current = exc.details.get("current_revision")
            return c.ProposeReply(result="stale", revision=None, reason=f"the current revision is {current}")
        except NotFound:
            return c.ProposeReply(result="invalid", revision=None, reason="workspace_not_found")
        except BadProposal as exc:
            return c.ProposeReply(result="invalid", revision=None, reason=f"{exc.field}: {exc.reason}")
        return c.ProposeReply(result="applied", revision=row["revision"])

    async def _made_by_run(self, actor: Actor, req: c.ProposeRequest) -> int | None:
        run_id = req.derived_from.run_id
        if run_id is None:
            return None
        async with self._db.statement() as conn:
            return await self._repo.for_scope(actor.scope).run_revision(
                conn, workspace_id=req.workspace_id, run_id=run_id
            )

    async def _write(
        self,
        actor: Actor,
        workspace_id: str,
        expected_revision: int,
        build: Callable[[Content], Content],
        *,
        author: Literal["model", "user"],
    ) -> asyncpg.Record:
        async with self._db.transaction() as conn:
            return await self.write_in(
                conn,
                scope=actor.scope,
                workspace_id=workspace_id,
                expected_revision=expected_revision,
                build=build,
                author=author,
            )

    async def write_in(
        self,
        conn: asyncpg.Connection,
        *,
        scope: str,
        workspace_id: str,
        expected_revision: int | None,
        build: Callable[[Content], Content],
        author: c.Author,
    ) -> asyncpg.Record:
        """One revision in the caller's transaction. `expected_revision=None` is the service's own edit (a
        drift's question): it builds on whatever revision is current under the workspace lock."""
        workspaces = self._repo.for_scope(scope)
        workspace = await workspaces.lock_workspace(conn, id=workspace_id)
        if workspace is None or workspace["status"] == "deleted":
            raise not_found(workspace_id)
        current = workspace["checkpoint_revision"]
        if expected_revision is not None and current != expected_revision:
            raise Conflict("the checkpoint has a newer revision than expected", {"current_revision": current})
        previous = None
        if current:
            previous = await workspaces.latest_checkpoint(conn, workspace_id=workspace_id)
        content = build(_content(previous))
        row = await workspaces.insert_checkpoint(
            conn,
            workspace_id=workspace_id,
            revision=current + 1,
            summary=content.summary,
            questions=[q.model_dump() for q in content.questions],
            derived_from=content.derived_from.model_dump(mode="json"),
            author=author,
        )
        revised = c.CheckpointRevised(
            workspace_id=workspace_id, revision=current + 1, author=author, run_id=content.derived_from.run_id
        )
        await enqueue(conn, c.EVT_CHECKPOINT_REVISED, revised, scope=scope)
        return row
