"""The MCP face of the gateway (`/mcp`): its tools, their input models, and its resource URI templates.

Every input model is the bus request the matching HTTP route sends, so a tool takes exactly what the API
takes and the owner service checks it by the same rules. None of them carries an actor: the gateway sets
it from the bearer token, as it does for the API.
"""

from __future__ import annotations

from dataclasses import dataclass

from shared.contracts import assets, publication, runhost, workspace
from shared.contracts.common import Model

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
        "One workspace: its goal, its bounded catalog of publications, sources and artifacts (`limit` bounds "
        "the catalog; `complete` and `omitted` say what was left out) and its checkpoint (null when none "
        "exists yet), re-validated at this read.",
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
        assets.ReadRequest,
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
)
