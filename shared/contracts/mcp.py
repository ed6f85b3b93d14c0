"""The MCP face of the gateway (`/mcp`): its tools, their input and output models, and its resource URI
templates.

A tool's input is the bus request the matching HTTP route sends, so a tool takes what the API takes and the
owner service checks it by the same rules, but where the MCP face takes less: a run the run host drives
(`start_run`) names no outside agent, and the run-bound tools take the run and its lease from the MCP
session (or as arguments) and advertise only the refs a run reads. None of them carries an actor: the
gateway sets it from the bearer token, as it does for the API. Every field a model fills in carries a
description, and every tool declares the model it answers.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Literal

from pydantic import ConfigDict, Field

from shared.contracts import assets, publication, runhost, workspace
from shared.contracts.common import INT32_MAX, Model, StrictInt, id_field
from shared.contracts.workspace import Catalog, Checkpoint, Workspace

REVEAL_LEASE = (
    "Also answer the lease token. Leave it false: this MCP session holds the lease, and the run tools use it "
    "when you leave out run_id and lease. (Without an MCP session the token is always answered.)"
)


class BeginRunRequest(runhost.RunQuestion):
    """A run the calling agent drives itself, bound to this MCP session with its lease."""

    workspace_id: str = id_field("The workspace (ws_…) whose goal and catalog the run researches.")
    lease_seconds: runhost.LeaseSeconds | None = Field(default=None, description=runhost.LEASE_SECONDS_TOLD)
    agent: runhost.RunAgent | None = Field(
        default=None, description="Who you are (your name, and your model if any), named in the run's provenance."
    )
    reveal_lease: bool = Field(default=False, description=REVEAL_LEASE)


class StartRunRequest(runhost.PolicyRunRequest):
    """A run the run host's own policy drives (one the agent drives itself is begun with begin_run)."""

    model: str | None = Field(
        default=None, pattern=runhost.POLICY_PATTERN, description="The run host's policy; leave it out for its default."
    )
    workspace_id: str = id_field("The workspace (ws_…).")


class RunBound(Model):
    """A run-bound call: the run this MCP session holds, or another whose lease the caller holds itself."""

    # A lease is only ever the lease of a named run.
    model_config = ConfigDict(json_schema_extra={"dependentRequired": {"lease": ["run_id"]}})

    run_id: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        description="Leave it out to act on the run this MCP session began or took over last; or a run (run_…) "
        "this session holds, or whose lease you pass.",
    )
    lease: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        description="Leave it out: this MCP session holds the lease. Only for a lease you hold yourself "
        "(rl_…, as begin_run answered it without a session, or with reveal_lease), with its run_id.",
    )


class RunSearchRequest(RunBound, runhost.SearchBody):
    pass


class BoundCatalogRequest(RunBound):
    cursor: str | None = runhost.CatalogCursor


class PublicationAt(Model):
    kind: Literal["publication"] = Field(description="An earlier publication, read at its exact version.")
    id: str = id_field("The publication (pub_…), as the catalog or a search hit names it.")
    version: StrictInt = Field(ge=1, le=INT32_MAX, description="Its exact version.")


class EvidencePassage(Model):
    kind: Literal["evidence"] = Field(description="A passage of a source, read by the evidence id search gave it.")
    id: str = id_field("The `evidence_id` of a run_search hit.")


class RunReadRequest(RunBound):
    ref: Annotated[PublicationAt | EvidencePassage, Field(discriminator="kind")] = Field(
        description="What to read: {kind: publication, id, version} or {kind: evidence, id: <evidence_id>}."
    )


class RunWriteRequest(RunBound, runhost.WriteBody):
    pass


class RunFinishRequest(RunBound, runhost.FinishBody):
    pass


class TakeOverRequest(runhost.TakeRequest):
    reveal_lease: bool = Field(default=False, description=REVEAL_LEASE)


class SessionLease(Model):
    """A run's lease as an MCP tool answers it: the token only when it was asked for (or passed)."""

    token: str | None
    epoch: int
    expires_at: datetime


class TakenOver(Model):
    """What take_over_run answers: the new lease (held by this MCP session) and what to go on from."""

    lease: SessionLease
    resume: runhost.Resume


class WorkspaceView(Model):
    """What show_workspace answers: the workspace, its catalog, and its checkpoint (null when none exists yet)."""

    workspace: Workspace
    catalog: Catalog
    checkpoint: Checkpoint | None


class WrittenFile(Model):
    """What write_run_file answers: the file written and its size in bytes."""

    path: str
    size: int


LIST_WORKSPACES = "list_workspaces"
SHOW_WORKSPACE = "show_workspace"
SEARCH_EVIDENCE = "search_evidence"
READ_EVIDENCE = "read_evidence"
READ_PUBLICATION = "read_publication"
START_RUN = "start_run"
GET_RUN = "get_run"
GET_LEDGER = "get_ledger"
LIST_RUN_FILES = "list_run_files"
READ_RUN_FILE = "read_run_file"
PROPOSE_CHECKPOINT_UPDATE = "propose_checkpoint_update"
# An outside agent driving a run of its own (driver "external"): the run-bound tools act on the run bound to the
# MCP session, or on `run_id` with `lease`.
BEGIN_RUN = "begin_run"
RUN_CATALOG = "run_catalog"
RUN_SEARCH = "run_search"
RUN_READ = "run_read"
WRITE_RUN_FILE = "write_run_file"
RENEW_LEASE = "renew_lease"
TAKE_OVER_RUN = "take_over_run"
FINISH_RUN = "finish_run"

# Resources are addressed by exact version; an evidence id names one passage of one asset version.
PUBLICATION_VERSION_URI = "dossier://publications/{id}/versions/{version}"
EVIDENCE_URI = "dossier://evidence/{evidence_id}"


@dataclass(frozen=True)
class ToolContract:
    name: str
    description: str
    input: type[Model]
    output: type[Model]
    read_only: bool
    idempotent: bool = False


BOUND = "Acts on the run this MCP session holds (begin_run, take_over_run), or on `run_id` with `lease`."

TOOLS: tuple[ToolContract, ...] = (
    ToolContract(
        LIST_WORKSPACES,
        "The workspaces of your scope, each with its current goal version and text; one page, newest first "
        "(pass `next_cursor` back as `cursor` for the next).",
        workspace.ListRequest,
        workspace.WorkspaceList,
        read_only=True,
    ),
    ToolContract(
        SHOW_WORKSPACE,
        "One workspace: its goal, a page of its catalog of publications, sources and artifacts (the "
        "analyst's own first; `limit` bounds the page, `omitted` says how many items follow it and "
        "`next_cursor`, passed as `cursor`, names the next page) and its checkpoint (null when none exists "
        "yet), re-validated at this read.",
        workspace.CatalogRequest,
        WorkspaceView,
        read_only=True,
    ),
    ToolContract(
        SEARCH_EVIDENCE,
        "Full-text search over the active versions of your sources, outside any run (a run's own search is "
        "run_search). A hit is a snippet with its locator, not a delivered passage: read it with read_evidence.",
        assets.SearchRequest,
        assets.SearchReply,
        read_only=True,
    ),
    ToolContract(
        READ_EVIDENCE,
        "One evidence passage at the exact asset version its id names, with its locator and the version's "
        "content hash, outside any run (a run reads with run_read). A superseded, retired or failed version "
        "answers `unavailable`.",
        assets.EvidenceReadRequest,
        assets.Evidence,
        read_only=True,
    ),
    ToolContract(
        READ_PUBLICATION,
        "A publication at an exact version: body, content hash and the sources it consumed. A withdrawn "
        "version answers `unavailable`.",
        publication.ReadRequest,
        publication.PublicationVersion,
        read_only=True,
    ),
    ToolContract(
        START_RUN,
        "Start a research run that Dossier's own policy drives (to drive a run yourself, use begin_run). "
        "`history` selects earlier publication versions to read exactly. Idempotent on `request_id`: the "
        "same id with the same parameters returns the same run (`created: false`); with other parameters it "
        "answers `conflict`.",
        StartRunRequest,
        runhost.AdmitReply,
        read_only=False,
        idempotent=True,
    ),
    ToolContract(
        GET_RUN,
        "A run: its status (admitted, running, completed, failed, cancelled), its frozen catalog and goal "
        "version, and its publication once completed.",
        runhost.RunIdRequest,
        runhost.Run,
        read_only=True,
    ),
    ToolContract(
        GET_LEDGER,
        "A run's ledger: every material it listed, read, included in a model request, or found unavailable, "
        "at its exact version; one page in `seq` order (pass `next_cursor` back as `cursor` for the next).",
        runhost.RunPageRequest,
        runhost.Ledger,
        read_only=True,
    ),
    ToolContract(
        LIST_RUN_FILES,
        "The files of a run's working memory (plan.md, sources/, notes/, draft.md) with their sizes; one page "
        "by path (pass `next_cursor` back as `cursor` for the next).",
        runhost.RunPageRequest,
        runhost.FileList,
        read_only=True,
    ),
    ToolContract(
        READ_RUN_FILE,
        "The text of one file of a run's working memory.",
        runhost.ReadFileRequest,
        runhost.FileText,
        read_only=True,
    ),
    ToolContract(
        PROPOSE_CHECKPOINT_UPDATE,
        "Update a workspace's checkpoint (research progress) by compare-and-swap: `expected_revision` is "
        "the revision you read (0 for the first). A mismatch answers `conflict` with `current_revision`. "
        "An omitted summary keeps the current one; a question closes only when it is resolved.",
        workspace.UpdateCheckpointRequest,
        workspace.Checkpoint,
        read_only=False,
    ),
    ToolContract(
        BEGIN_RUN,
        "Begin a run that you drive yourself: Dossier freezes the goal version and the catalog, and keeps the "
        "ledger, the working files and the published answer. This MCP session then holds the run and its "
        "lease: call the run tools (run_catalog, run_search, run_read, write_run_file, renew_lease, "
        "finish_run) with their own arguments only. Renew the lease before `lease_state.expires_at`. "
        "Idempotent on `request_id`.",
        BeginRunRequest,
        runhost.Run,
        read_only=False,
        idempotent=True,
    ),
    ToolContract(
        RUN_CATALOG,
        "Your run's catalog as admitted, a page at a time: the analyst's sources and publications first, then "
        "earlier runs' conclusions, each with its exact version. While `next_cursor` is not null, pass it as "
        "`cursor` for the next page; every item on any page can be read with run_read. " + BOUND,
        BoundCatalogRequest,
        Catalog,
        read_only=False,
    ),
    ToolContract(
        RUN_SEARCH,
        "Search what your run may read. A hit is either a passage of a source (`ref` the source version, "
        "with an `evidence_id` and `locator`: read it with run_read {kind: evidence, id: <evidence_id>}) or, "
        "after the passages, an earlier publication of the workspace that matches (`ref` its exact version, "
        "no `evidence_id`: read it with run_read by that ref). A page holds at most `limit` hits; "
        "`next_cursor` asks for the next page of the same query, until it is null. " + BOUND,
        RunSearchRequest,
        runhost.ExternalSearch,
        read_only=False,
    ),
    ToolContract(
        RUN_READ,
        "Read material for your run at its exact version: a publication {kind: publication, id, version} or "
        "a passage {kind: evidence, id: <evidence_id from run_search>}. The text is kept in the run's files at "
        "`path`; reading it again answers from there and is not recorded twice. " + BOUND,
        RunReadRequest,
        runhost.ExternalRead,
        read_only=False,
        idempotent=True,
    ),
    ToolContract(
        WRITE_RUN_FILE,
        "Write one of your run's working files: plan.md, draft.md or notes/<name>.md (at most 1 MiB). " + BOUND,
        RunWriteRequest,
        WrittenFile,
        read_only=False,
        idempotent=True,
    ),
    ToolContract(
        RENEW_LEASE,
        "Renew your run's lease: a later expiry for the same lease. " + BOUND,
        RunBound,
        SessionLease,
        read_only=False,
    ),
    ToolContract(
        TAKE_OVER_RUN,
        "Resume a run whose lease expired (or any with `force`) as a new session: a new lease, which this MCP "
        "session then holds, and what you need to go on without reading anything twice (the plan, the files, "
        "the reads and their paths).",
        TakeOverRequest,
        TakenOver,
        read_only=False,
    ),
    ToolContract(
        FINISH_RUN,
        "Finish your run with its answer (markdown). Cite what you use as `source_id@vN locator` for evidence "
        "and `pub_…@vN` for publications; every cited ref must have been read by this run at that version "
        "(else `invalid` naming the refs). The answer is published with exactly those sources. " + BOUND,
        RunFinishRequest,
        runhost.Run,
        read_only=False,
    ),
)
