"""The tools a policy can call. Every read goes to the owner service with the run's grant."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import asyncpg

from services.runhost.availability import unusable
from services.runhost.catalog import RunCatalog
from services.runhost.leases import StaleLease
from services.runhost.ledger import Inclusion, RunLedger
from services.runhost.memory import RunFiles, pointer, provenance_of, source_name
from services.runhost.owners import Owners
from services.runhost.policies.vocabulary import MALFORMED, ToolCall, ToolResult
from services.runhost.search import Asked, Found, search_for_run, search_text
from services.runhost.tool_args import (
    Args,
    BadArguments,
    ListCatalogArgs,
    ReadEvidenceArgs,
    ReadFileArgs,
    ReadPublicationArgs,
    SearchEvidenceArgs,
    UpdatePlanArgs,
    WriteDraftArgs,
    WriteNoteArgs,
    check_arguments,
)
from shared.contracts import assets
from shared.contracts import publication as pub
from shared.contracts.common import Actor, Ref
from shared.contracts.runhost import SourceRead
from shared.contracts.workspace import Catalog
from shared.db import session_lost
from shared.errors import DomainError, Invalid, NotFound, Unavailable, too_long

log = logging.getLogger("dossier.runhost.tools")
# A read answers at most this much, with where the rest starts: it fits whole in the model's window.
READ_LIMIT_MAX = 1000
# A page of search_evidence: this many passages, and beside them earlier publications (services/runhost/search.py).
SEARCH_LIMIT = 10
MAX_NOTE_CHARS = 20_000
MAX_DRAFT_CHARS = 200_000
MAX_PLAN_CHARS = 64 * 1024
CATALOG_FILE = "catalog.md"
CATALOG_KINDS = ("source", "publication", "artifact")
CATALOG_PREVIEW = 400


Outcome = tuple[ToolResult, list[Inclusion]]
A = TypeVar("A", bound=Args)


@dataclass(frozen=True)
class Reading:
    """How catalog.md tells its reader to read what it lists: the first line, and what the search also finds;
    and how a refused read tells it to reach an item its run may not read yet (`reach`)."""

    how: str
    search: str
    reach: str = (
        "a run reads what its catalog lists and what its own search found: find it with search_evidence, then"
        " read a [publication] hit with read_publication (its id and version), a [source] hit with read_evidence"
        " (its evidence id)"
    )


# The run host's model reads with its own tools.
POLICY_READING = Reading(
    "Read sources with search_evidence (source_id for one), then read_evidence; publications with read_publication.",
    "search_evidence also finds sources and earlier publications the catalog omits",
)


def agent_reading(run_id: str) -> Reading:
    """An outside agent reads through the run's own routes: only their reads are the run's (a plain
    search_evidence or read_evidence leaves no ledger row, so an answer could not cite what it returned)."""
    return Reading(
        "Find passages with the run's search (MCP run_search, or GET /v1/runs/{id}/search) and read them, or a"
        " publication at its version, with the run's read (MCP run_read, or POST /v1/runs/{id}/read): only what"
        " those reads returned is recorded in the run's ledger and may be cited.".replace("{id}", run_id),
        "the run's search also finds sources and earlier publications the catalog omits",
        "a run reads what its catalog lists and what its own search found: find it with the run's search (MCP"
        " run_search, or GET /v1/runs/{id}/search; `next_cursor` pages on), then read the hit's ref (a passage by"
        " its evidence_id) with the run's read".replace("{id}", run_id),
    )


def _kind_order(kind: str) -> int:
    return CATALOG_KINDS.index(kind) if kind in CATALOG_KINDS else len(CATALOG_KINDS)


class ToolBox:
    def __init__(
        self,
        *,
        actor: Actor,
        grant: str,
        catalog: Catalog,
        files: RunFiles,
        ledger: RunLedger,
        owners: Owners,
        reading: Reading = POLICY_READING,
        pages: RunCatalog | None = None,
    ):
        """`catalog`: the first page of the run's catalog; `pages`: the whole of it (services/runhost/catalog.py)."""
        self.actor, self.grant, self.catalog = actor, grant, catalog
        self.files, self.ledger, self.owners = files, ledger, owners
        self.reading = reading
        self.pages = pages

    async def execute(self, call: ToolCall) -> Outcome:
        """Run one tool. Bad arguments and refusals are answered back to the model, never raised."""
        if not call.name:
            return self._error(call, "the reply held neither a tool call nor an answer; call a tool or finish"), []
        tool = TABLE.get(call.name)
        if tool is None:
            return self._error(call, f"unknown tool {call.name!r}"), []
        if MALFORMED in call.arguments:
            return self._error(call, f"the arguments of {call.name} are not a JSON object"), []
        try:
            result, inclusions = await tool.run(self, call)
        except (StaleLease, OSError, asyncpg.PostgresError):
            # Lost lease and broken infrastructure are the worker's business, not the model's.
            raise
        except BadArguments as exc:
            return self._error(call, str(exc)), []
        except DomainError as exc:
            return self._error(call, f"{exc.code}: {exc.message}"), []
        except Exception as exc:
            if session_lost(exc):  # asyncpg says some of these with a client error
                raise
            # A tool that trips over what the model asked for is answered back; the run goes on.
            log.warning("run tool %s failed on its arguments: %r", call.name, exc)
            return self._error(call, f"the tool {call.name} failed ({type(exc).__name__})"), []
        result.call_id = call.call_id
        return result, inclusions

    async def dispatch(self, call: ToolCall) -> Outcome:
        """Run one tool for a caller that answers refusals itself (an outside agent's route): bad arguments
        and domain errors are raised, not answered back."""
        tool = TABLE.get(call.name)
        if tool is None:
            raise Invalid(f"unknown tool {call.name!r}")
        try:
            result, inclusions = await tool.run(self, call)
        except BadArguments as exc:
            raise Invalid(str(exc)) from None
        result.call_id = call.call_id
        return result, inclusions

    def _error(self, call: ToolCall, message: str) -> ToolResult:
        return ToolResult(call.name, call.arguments, f"error: {message}", ok=False, call_id=call.call_id)

    async def _list_catalog(self, call: ToolCall, args: ListCatalogArgs) -> Outcome:
        if args.cursor is not None and self.pages is None:
            raise Invalid("this run's catalog has no later pages", {"field": "cursor"})
        page = self.catalog if args.cursor is None or self.pages is None else await self.pages.page(args.cursor)
        lines = []
        # Each item as the admission kept it (JSON: its time as stored), which is also what `data` carries.
        listed = page.model_dump(mode="json")
        items: list[dict[str, Any]] = listed["items"]
        # Sources first, as they are what is read: a bounded read of catalog.md's start finds them.
        in_order = sorted(items, key=lambda i: _kind_order(i["kind"]))
        await self.ledger.listed_all([(Ref(kind=i["kind"], id=i["id"], version=i["version"]), None) for i in in_order])
        for item in in_order:
            state = "available" if item["available"] else f"unavailable ({item['reason']})"
            lines.append(
                f"- {item['kind']} {item['id']}@{item['version']} {item['title']!r} {item['created_at']} {state}"
            )
        if page.next_cursor is not None:
            tail = (
                f"catalog incomplete: {page.omitted} more items after this page;"
                f" the catalog with cursor {page.next_cursor!r} lists the next page"
            )
        else:
            tail = "the catalog ends with this page" if args.cursor else "catalog complete"
        text = "\n".join(
            [
                "# Catalog frozen at admission" + (" (a later page)" if args.cursor else ""),
                self.reading.how,
                *lines,
                f"({tail}; {self.reading.search})",
            ]
        )
        # The listing lives in the run's files; the context keeps a pointer, never the whole list.
        await self.files.write(CATALOG_FILE, text)
        counts = {kind: sum(1 for i in page.items if i.kind == kind) for kind in CATALOG_KINDS}
        summary = ", ".join(f"{n} {kind}s" for kind, n in counts.items() if n or kind != "artifact")
        more = f"; next page: list_catalog cursor {page.next_cursor!r}" if page.next_cursor else ""
        shown = f"{pointer(CATALOG_FILE, text, CATALOG_PREVIEW)}\n({summary}; read it with read_file{more})"
        data = listed | {"path": CATALOG_FILE}
        return ToolResult("list_catalog", call.arguments, shown, data=data, value=page), []

    async def _read_publication(self, call: ToolCall, args: ReadPublicationArgs) -> Outcome:
        id, version = args.id, args.version
        ref = Ref(kind="publication", id=id, version=version)
        path = f"sources/{source_name('publication', id, ref.version)}.txt"
        row = await self.files.entry(path)
        if row is not None:
            return await self._refused(call, path, row) or await self._pointer_result(call, path, row)
        # A publication a later page of the catalog holds is read under a grant that names it too.
        grant = self.grant if self.pages is None else await self.pages.grant_for(ref, self.grant)
        try:
            body = await self.owners.read_publication_for_run(self.actor, grant, id=id, version=ref.version or 0)
        except (Unavailable, NotFound) as exc:
            return await self._not_read(call, exc, ref, f"publication {id}@{version}", path)
        created = body.created_at.isoformat().replace("+00:00", "Z")
        text = f"# {body.title} ({id}@v{version}, {created})\n\n{body.body}"
        prov = {"ref": ref.model_dump(), "content_hash": body.content_hash, "locator": None}
        await self.files.write(
            path, text, provenance=prov, with_record=self.ledger.read_row(ref, body.content_hash, None)
        )
        return self._fresh_pointer(call, path, text, prov)

    async def search(self, asked: Asked) -> Found[assets.SearchHit, pub.PublicationHit]:
        """A page of the evidence passages and earlier publications of the run's workspace that match
        (services/runhost/search.py). Each hit shown is recorded once as `listed`, and no other: a hit the
        caller is not shown was not found by the run."""
        found = await search_for_run(self.owners, self.actor, self.grant, asked)
        await self.ledger.listed_all(
            [(Ref(kind="source", id=hit.source_id, version=hit.version), hit.locator) for hit in found.passages]
            + [(Ref(kind="publication", id=item.id, version=item.version), None) for item in found.publications]
        )
        return found

    async def _search_evidence(self, call: ToolCall, args: SearchEvidenceArgs) -> Outcome:
        found = await self.search(Asked(args.query, SEARCH_LIMIT, args.cursor, args.source_id))
        data = {
            "hits": [hit.model_dump(mode="json") for hit in found.passages],
            "publications": [item.model_dump(mode="json") for item in found.publications],
            "next_cursor": found.next_cursor,
        }
        return ToolResult(call.name, call.arguments, search_text(found, call.name), data=data), []

    async def _read_evidence(self, call: ToolCall, args: ReadEvidenceArgs) -> Outcome:
        evidence_id = args.evidence_id
        path = f"sources/{source_name('evidence', 'E-' + evidence_id, None)}.txt"
        row = await self.files.entry(path)
        if row is not None:
            return await self._refused(call, path, row) or await self._pointer_result(call, path, row)
        try:
            passage = await self.owners.read_evidence_for_run(self.actor, self.grant, evidence_id=evidence_id)
        except (Unavailable, NotFound) as exc:
            return await self._not_read(
                call, exc, Ref(kind="evidence", id=evidence_id), f"evidence {evidence_id}", path
            )
        ref = Ref(kind="source", id=passage.source_id, version=passage.version)
        content_hash = passage.content_hash
        text = f"# {passage.source_id}@v{passage.version} {passage.locator}\n\n{passage.text}"
        prov = {"ref": ref.model_dump(), "content_hash": content_hash, "locator": passage.locator}
        await self.files.write(
            path, text, provenance=prov, with_record=self.ledger.read_row(ref, content_hash, passage.locator)
        )
        return self._fresh_pointer(call, path, text, prov)

    async def _not_read(self, call: ToolCall, exc: Unavailable | NotFound, ref: Ref, named: str, path: str) -> Outcome:
        """A read its owner refused. Material that exists but may not be used now (withdrawn, retired) is an
        `unavailable` row; an id that names nothing (a typo, another scope's) is not found and records nothing."""
        if isinstance(exc, NotFound):
            # The same words whether the id names nothing or something this run may not read yet: nothing leaks.
            text = f"not found: {named} is neither in this run's catalog nor found by its search; {self.reading.reach}"
            return _source_read(call, text, SourceRead(reason="not_found", path=path), ok=False), []
        reason = str(exc.details.get("reason", "unavailable"))
        await self.ledger.unavailable(ref, reason=reason)
        text = f"unavailable: {named} ({reason})"
        return _source_read(call, text, SourceRead(reason=reason, path=path), ok=False), []

    async def _refused(self, call: ToolCall, path: str, row: Mapping[str, Any]) -> Outcome | None:
        """A read from the run's own copy of a material (`row`, its index row) asks its owner again
        (services/runhost/availability.py): a version withdrawn or retired since the run read it is refused,
        with an `unavailable` row."""
        prov = provenance_of(row)
        if prov is None:
            return None
        ref = Ref.model_validate(prov["ref"])
        reason = (await unusable(self.owners, self.actor, [ref])).get(ref.key())
        if reason is None:
            return None
        await self.ledger.unavailable(ref, reason=reason, locator=prov["locator"])
        text = f"unavailable: {ref.id}@v{ref.version} ({reason}); the run's copy may not be used"
        return _source_read(call, text, SourceRead(reason=reason, path=path), ok=False), []

    def _fresh_pointer(self, call: ToolCall, path: str, text: str, prov: dict[str, Any]) -> Outcome:
        """A source read for the first time (`text` just written with `prov`): its characters count once in
        the run's `source_chars_read`."""
        return _pointer(call, path, text, prov, fresh_chars=len(text))

    async def _pointer_result(self, call: ToolCall, path: str, row: Mapping[str, Any]) -> Outcome:
        """The run's copy of a material read again: a pointer to it, as at its first read."""
        return _pointer(call, path, await self.files.text(path, row), provenance_of(row))

    async def _read_file(self, call: ToolCall, args: ReadFileArgs) -> Outcome:
        path = args.path
        offset, limit = max(0, args.offset), max(1, min(args.limit, READ_LIMIT_MAX))
        text, row = await self.files.read_indexed(path)
        if path.startswith("sources/"):
            refused = await self._refused(call, path, row)
            if refused is not None:
                return refused
        part = text[offset : offset + limit]
        end = offset + len(part)
        rest = f"; the rest from offset {end}" if end < len(text) else ""
        header = f"[{path} chars {offset}-{end} of {len(text)}{rest}]"
        inclusions = []
        prov = provenance_of(row) if path.startswith("sources/") else None
        if prov is not None and part:
            locator = prov["locator"] or f"chars:{offset}-{end}"
            inclusions.append(Inclusion(Ref.model_validate(prov["ref"]), prov["content_hash"], locator))
        data = {"path": path, "offset": offset, "end": end, "total": len(text), "body": part}
        return ToolResult(call.name, call.arguments, f"{header}\n{part}", data=data), inclusions

    async def _write_note(self, call: ToolCall, args: WriteNoteArgs) -> Outcome:
        path = f"notes/{args.source}.md"
        return await self._write_bounded(call, path, args.text, MAX_NOTE_CHARS, "note", data={"path": path})

    async def _write_draft(self, call: ToolCall, args: WriteDraftArgs) -> Outcome:
        return await self._write_bounded(call, "draft.md", args.text, MAX_DRAFT_CHARS, "draft")

    async def _update_plan(self, call: ToolCall, args: UpdatePlanArgs) -> Outcome:
        return await self._write_bounded(call, "plan.md", args.text, MAX_PLAN_CHARS, "plan")

    async def _write_bounded(
        self, call: ToolCall, path: str, text: str, limit: int, what: str, data: dict[str, Any] | None = None
    ) -> Outcome:
        """Write one of the run's own files; a text over its limit is refused before anything is written."""
        if len(text) > limit:
            raise Invalid(too_long(f"the {what}", len(text), limit), {"limit": limit, "size": len(text)})
        await self.files.write(path, text)
        return ToolResult(call.name, call.arguments, f"wrote {path} ({len(text)} chars)", data=data or {}), []


def _source_read(call: ToolCall, text: str, read: SourceRead, ok: bool = True) -> ToolResult:
    """A read tool's answer; its JSON holds the fields the tool set."""
    data = read.model_dump(mode="json", exclude_unset=True)
    return ToolResult(call.name, call.arguments, text, ok=ok, data=data, value=read)


@dataclass(frozen=True)
class Tool(Generic[A]):
    """One tool the toolbox runs: the model its arguments are checked against, and what runs them."""

    args: type[A]
    handler: Callable[[ToolBox, ToolCall, A], Awaitable[Outcome]]

    async def run(self, toolbox: ToolBox, call: ToolCall) -> Outcome:
        return await self.handler(toolbox, call, check_arguments(self.args, call.name, call.arguments))


# Every tool a call may name, but `finish`: the loop ends the run with it (services/runhost/loop.py).
TABLE: dict[str, Tool[Any]] = {
    "list_catalog": Tool(ListCatalogArgs, ToolBox._list_catalog),
    "read_publication": Tool(ReadPublicationArgs, ToolBox._read_publication),
    "search_evidence": Tool(SearchEvidenceArgs, ToolBox._search_evidence),
    "read_evidence": Tool(ReadEvidenceArgs, ToolBox._read_evidence),
    "read_file": Tool(ReadFileArgs, ToolBox._read_file),
    "write_note": Tool(WriteNoteArgs, ToolBox._write_note),
    "write_draft": Tool(WriteDraftArgs, ToolBox._write_draft),
    "update_plan": Tool(UpdatePlanArgs, ToolBox._update_plan),
}


def _pointer(
    call: ToolCall, path: str, text: str, prov: dict[str, Any] | None, fresh_chars: int | None = None
) -> Outcome:
    """The model gets a pointer to a source's copy; the preview in it is part of the body, so it is included."""
    ref = Ref.model_validate(prov["ref"]) if prov is not None else None
    inclusions = []
    if prov is not None and ref is not None:
        preview = min(len(text), 160)
        locator = prov["locator"] or f"chars:0-{preview}"
        inclusions.append(Inclusion(ref, prov["content_hash"], locator))
    read = SourceRead(path=path, chars=len(text), ref=ref)
    if fresh_chars is not None:
        read.fresh_chars = fresh_chars  # set, so in the JSON: a first read only
    return _source_read(call, pointer(path, text), read), inclusions
