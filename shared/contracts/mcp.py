"""The MCP face of the gateway (`/mcp`): its tools, their input models, and its resource URI templates.

Every input model is the bus request the matching HTTP route sends, so a tool takes exactly what the API
takes and the owner service checks it by the same rules. None of them carries an actor: the gateway sets
it from the bearer token, as it does for the API.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from pydantic import Field, Strict

from shared.contracts import assets, publication, runhost, workspace
from shared.contracts.common import Integral, Model, Text
from shared.contracts.workspace import Catalog, Checkpoint, Workspace


class BeginRunRequest(Model):
    """A run the calling agent drives itself; its answer carries the lease (token, epoch, expiry)."""

    workspace_id: str = runhost.Id
    question: Text = Field(min_length=1, max_length=4000)
    request_id: str = runhost.Id
    history: list[runhost.HistoryRef] = Field(default_factory=list, max_length=50)
    lease_seconds: (
        Annotated[int, Strict(), Field(ge=runhost.LEASE_SECONDS_MIN, le=runhost.LEASE_SECONDS_MAX), Integral] | None
    ) = None


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
# An outside agent driving a run of its own (driver "external"): the run-bound tools take `run_id` and `lease`.
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
    read_only: bool
    idempotent: bool = False


TOOLS: tuple[ToolContract, ...] = (
    ToolContract(
        LIST_WORKSPACES,
        "The workspaces of your scope, each with its current goal version and text; one page, newest first "
        "(pass `next_cursor` back as `cursor` for the next).",
        workspace.ListRequest,
        read_only=True,
    ),
    ToolContract(
        SHOW_WORKSPACE,
        "One workspace: its goal, a page of its catalog of publications, sources and artifacts (the "
        "analyst's own first; `limit` bounds the page, `omitted` says how many items follow it and "
        "`next_cursor`, passed as `cursor`, names the next page) and its checkpoint (null when none exists "
        "yet), re-validated at this read.",
        workspace.CatalogRequest,
        read_only=True,
    ),
    ToolContract(
        SEARCH_EVIDENCE,
        "Full-text search over the active versions of your sources. A hit is a snippet with its locator, "
        "not a delivered passage: read it with read_evidence.",
        assets.SearchRequest,
        read_only=True,
    ),
    ToolContract(
        READ_EVIDENCE,
        "One evidence passage at the exact asset version its id names, with its locator and the version's "
        "content hash. A superseded, retired or failed version answers `unavailable`.",
        assets.EvidenceReadRequest,
        read_only=True,
    ),
    ToolContract(
        READ_PUBLICATION,
        "A publication at an exact version: body, content hash and the sources it consumed. A withdrawn "
        "version answers `unavailable`.",
        publication.ReadRequest,
        read_only=True,
    ),
    ToolContract(
        START_RUN,
        "Start a research run on a workspace. `history` selects earlier publication versions to read "
        "exactly. Idempotent on `request_id`: the same id with the same parameters returns the same run "
        "(`created: false`); with other parameters it answers `conflict`.",
        runhost.AdmitRequest,
        read_only=False,
        idempotent=True,
    ),
    ToolContract(
        GET_RUN,
        "A run: its status (admitted, running, completed, failed, cancelled), its frozen catalog and goal "
        "version, and its publication once completed.",
        runhost.RunIdRequest,
        read_only=True,
    ),
    ToolContract(
        GET_LEDGER,
        "A run's ledger: every material it listed, read, included in a model request, or found unavailable, "
        "at its exact version; one page in `seq` order (pass `next_cursor` back as `cursor` for the next).",
        runhost.RunPageRequest,
        read_only=True,
    ),
    ToolContract(
        LIST_RUN_FILES,
        "The files of a run's working memory (plan.md, sources/, notes/, draft.md) with their sizes; one page "
        "by path (pass `next_cursor` back as `cursor` for the next).",
        runhost.RunPageRequest,
        read_only=True,
    ),
    ToolContract(
        READ_RUN_FILE,
        "The text of one file of a run's working memory.",
        runhost.ReadFileRequest,
        read_only=True,
    ),
    ToolContract(
        PROPOSE_CHECKPOINT_UPDATE,
        "Update a workspace's checkpoint (research progress) by compare-and-swap: `expected_revision` is "
        "the revision you read (0 for the first). A mismatch answers `conflict` with `current_revision`. "
        "An omitted summary keeps the current one; a question closes only when it is resolved.",
        workspace.UpdateCheckpointRequest,
        read_only=False,
    ),
    ToolContract(
        BEGIN_RUN,
        "Begin a run that you drive yourself: Dossier freezes the goal version and the catalog, and keeps the "
        "ledger, the working files and the published answer. The answer holds `lease.token`, shown only now: "
        "pass it as `lease` to the run_* tools, and renew it before `lease.expires_at`. Idempotent on "
        "`request_id` (a repeat answers the run without its token).",
        BeginRunRequest,
        read_only=False,
        idempotent=True,
    ),
    ToolContract(
        RUN_CATALOG,
        "Your run's catalog as admitted, a page at a time: the analyst's sources and publications first, then "
        "earlier runs' conclusions, each with its exact version. While `next_cursor` is not null, pass it as "
        "`cursor` for the next page; every item on any page can be read with run_read.",
        runhost.ExternalCatalogRequest,
        read_only=False,
    ),
    ToolContract(
        RUN_SEARCH,
        "Search the evidence your run may read; each hit has an `evidence_id` to read with run_read.",
        runhost.ExternalSearchRequest,
        read_only=False,
    ),
    ToolContract(
        RUN_READ,
        "Read material for your run at its exact version: `ref` is {kind: publication, id, version} or "
        "{kind: evidence, id: <evidence_id from run_search>}. The text is kept in the run's files at `path`; "
        "reading it again answers from there and is not recorded twice.",
        runhost.ExternalReadRequest,
        read_only=False,
        idempotent=True,
    ),
    ToolContract(
        WRITE_RUN_FILE,
        "Write one of your run's working files: plan.md, draft.md or notes/<name>.md (at most 1 MiB).",
        runhost.ExternalWriteRequest,
        read_only=False,
        idempotent=True,
    ),
    ToolContract(
        RENEW_LEASE,
        "Renew your run's lease: the same token, a later expiry.",
        runhost.LeaseRequest,
        read_only=False,
    ),
    ToolContract(
        TAKE_OVER_RUN,
        "Resume a run whose lease expired (or any with `force`) as a new session: a new lease and what you "
        "need to go on without reading anything twice (the plan, the files, the reads and their paths).",
        runhost.TakeRequest,
        read_only=False,
    ),
    ToolContract(
        FINISH_RUN,
        "Finish your run with its answer (markdown). Cite what you use as `source_id@vN locator` for evidence "
        "and `pub_…@vN` for publications; every cited ref must have been read by this run at that version "
        "(else `invalid` naming the refs). The answer is published with exactly those sources.",
        runhost.ExternalFinishRequest,
        read_only=False,
    ),
)
