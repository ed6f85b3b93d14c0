"""Bus contract of the workspace service: goals, associations, the bounded catalog, checkpoints, lifecycle."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import Field

from shared.contracts import assets
from shared.contracts.common import (
    INT32_MAX,
    EventType,
    Model,
    Page,
    PageRequest,
    PublicationRef,
    Ref,
    StrictInt,
    Subject,
    Text,
    id_field,
)

# What the assets service answers and announces: its own contract module owns these names.
ASSETS_CHECK = assets.CHECK
EVT_ASSET_ASSOCIATION_REQUESTED = assets.EVT_ASSOCIATION_REQUESTED

Id = Field(min_length=1, max_length=200)
# A bound on a title an association carries, far above any owner's own (theirs are settings, 500 by default).
TITLE_MAX_CHARS = 10_000

WorkspaceStatus = Literal["active", "archived"]
CatalogKind = Literal["publication", "source", "artifact"]
AssociationKind = Literal["conversation", "run", "source", "artifact", "publication"]
CATALOG_KINDS: tuple[str, ...] = ("publication", "source", "artifact")


# -- workspaces and goals ------------------------------------------------------------------------------


class Goal(Model):
    version: int
    text: str
    created_at: datetime


class Workspace(Model):
    id: str
    title: str
    status: WorkspaceStatus
    goal: Goal
    created_at: datetime
    updated_at: datetime


class WorkspaceList(Page):
    """Newest first: `created_at` then `id`, both descending."""

    items: list[Workspace]


class GoalVersions(Page):
    """Oldest first."""

    items: list[Goal]


class CreateRequest(Model):
    title: Text = Field(min_length=1)
    goal: Text


class ListRequest(PageRequest):
    pass


class WorkspaceIdRequest(Model):
    """Every request that names one workspace and nothing else."""

    workspace_id: str = Id


class WorkspacePageRequest(PageRequest):
    """A page of one workspace's list (goal versions, checkpoint revisions)."""

    workspace_id: str = Id


class DeleteReply(Model):
    workspace_id: str
    status: Literal["deleted"]


class GoalRevision(Model):
    """The body of `PUT /v1/workspaces/{id}/goal`."""

    text: Text
    expected_version: StrictInt = Field(ge=1, le=INT32_MAX)


class ReviseGoalRequest(GoalRevision):
    workspace_id: str = Id


# -- associations and the catalog -------------------------------------------------------------------


# The most items one catalog read may ask for (a deployment may lower it, `DOSSIER_CATALOG_MAX_LIMIT`).
CATALOG_LIMIT_MAX = 200


CURSOR_MAX_CHARS = 400


class CatalogRequest(Model):
    """A page of the catalog: the first one without `cursor`, then the one its predecessor's `next_cursor` names."""

    workspace_id: str = id_field("The workspace (ws_…).")
    limit: int | None = Field(
        default=None, ge=1, le=INT32_MAX, description="How many catalog items at most; leave it out for the default."
    )
    cursor: str | None = Field(
        default=None,
        min_length=1,
        max_length=CURSOR_MAX_CHARS,
        description="The `next_cursor` of the page before; leave it out for the first page.",
    )


class CatalogItem(Model):
    kind: CatalogKind
    id: str
    version: int | None
    title: str
    created_at: datetime
    run_id: str | None
    available: bool
    reason: str | None


class Catalog(Model):
    """One page of a catalog. `omitted`: how many items follow this page; `complete`: none do, and
    `next_cursor` (null then) names the page that follows."""

    items: list[CatalogItem]
    complete: bool
    omitted: int
    next_cursor: str | None = None


class CatalogBrowseRequest(PageRequest):
    """A page of the whole catalog, newest first, optionally of one kind (the workbench's catalog view).

    Unlike `CatalogRequest` (what a run is offered: one bounded page), every item is reachable by paging."""

    workspace_id: str = Id
    kind: CatalogKind | None = None
    # Only items whose title holds this text (any case); what the history picker filters by.
    q: str | None = Field(default=None, max_length=200)


class CatalogPage(Page):
    """`total`: the catalog's items of the kind asked for; `start`: the 1-based position of this page's first."""

    items: list[CatalogItem]
    total: int
    start: int


class SourceAssociation(Model):
    """The body of `POST /v1/workspaces/{id}/sources`."""

    source_id: str = Id


class AddSourceRequest(SourceAssociation):
    workspace_id: str = Id


class Association(Model):
    workspace_id: str
    kind: AssociationKind
    ref_id: str
    version: int | None
    run_id: str | None
    created_at: datetime


class ArtifactPin(Model):
    """The body of `POST /v1/workspaces/{id}/artifacts`."""

    artifact_id: str = Id


class PinRequest(ArtifactPin):
    workspace_id: str = Id
    # Set by runhost when it pins a run's report: the run's publication is its catalog item, not the report.
    run_id: str | None = Field(default=None, min_length=1, max_length=200)


class PinReply(Model):
    """Both outcomes of a pin, reported apart: the artifact service retains, the workspace associates."""

    artifact_id: str
    retention: Literal["retained", "failed"]
    association: Literal["confirmed", "unconfirmed"]
    reason: str | None = None


class AdmissionRequest(Model):
    workspace_id: str = Id
    run_id: str = Id
    limit: int | None = Field(default=None, ge=1, le=INT32_MAX)
    # Sent by earlier run hosts, which had the page filled for the question; the catalog's order no longer
    # depends on it (services/workspace/catalog.py), so it is accepted and not used.
    question: str | None = Field(default=None, max_length=4000)


class Admission(Model):
    """`catalog` is its first page; `catalog_as_of` the mark its later pages are read as of (`CATALOG_ADMITTED`)."""

    workspace_id: str
    status: WorkspaceStatus
    goal: Goal
    catalog: Catalog
    catalog_as_of: int | None = None


class AdmittedCatalogRequest(Model):
    """A later page of a run's catalog as admitted: `as_of` is its admission's mark, `cursor` a page's
    `next_cursor` of that catalog."""

    workspace_id: str = Id
    as_of: int = Field(ge=1)
    cursor: str = Field(min_length=1, max_length=CURSOR_MAX_CHARS)
    limit: int | None = Field(default=None, ge=1, le=INT32_MAX)


class CatalogHoldsRequest(Model):
    """Whether a run's catalog as admitted (as of `as_of`) holds an item, on whatever page."""

    workspace_id: str = Id
    as_of: int = Field(ge=1)
    kind: CatalogKind
    id: str = Id


class CatalogHolds(Model):
    held: bool


class AssociateRequest(Model):
    workspace_id: str = Id
    kind: AssociationKind
    ref_id: str = Id
    version: int | None = Field(default=None, ge=1, le=INT32_MAX)
    run_id: str | None = Field(default=None, max_length=200)
    # A publication's title, so that an association recorded before `publication.committed` has it too.
    title: str | None = Field(default=None, min_length=1, max_length=TITLE_MAX_CHARS)


class AssociateReply(Model):
    association: Literal["confirmed", "refused"]
    reason: str | None = None


class AssociationRefused(Model):
    """Payload of `workspace.association_refused`: runhost records that the workspace is gone or closed."""

    workspace_id: str
    kind: AssociationKind
    ref_id: str
    version: int | None
    run_id: str | None
    reason: Literal["workspace_deleted", "workspace_not_found", "workspace_archived"]


# -- checkpoint -------------------------------------------------------------------------------------

QuestionStatus = Literal["open", "resolved"]
# `system`: a revision the service made itself (a drift's open question), not the model's or a person's.
Author = Literal["model", "user", "system"]
CheckpointStatus = Literal["valid", "unavailable"]


class Question(Model):
    id: str
    text: str
    status: QuestionStatus


class DerivedFrom(Model):
    run_id: str | None = Field(default=None, max_length=200)
    publication: PublicationRef | None = None
    sources: list[Ref] = Field(default_factory=list, max_length=1000)


class UnavailableSource(Model):
    ref: Ref
    reason: str


class Checkpoint(Model):
    revision: int
    status: CheckpointStatus
    advisory: Literal[True] = True
    summary: str | None
    open_questions: list[Question]
    derived_from: DerivedFrom
    unavailable_sources: list[UnavailableSource]
    author: Author
    created_at: datetime


class CheckpointRevisions(Page):
    """Oldest first."""

    items: list[Checkpoint]


# The longest open question (a deployment may lower it, `DOSSIER_MAX_QUESTION_CHARS`).
QUESTION_MAX_CHARS = 2000


class CheckpointEdit(Model):
    """A person's edit. An omitted `summary` keeps the current one; a question closes only when resolved."""

    expected_revision: StrictInt = Field(
        ge=0, le=INT32_MAX, description="The revision you read (0 when there is no checkpoint yet)."
    )
    summary: Text | None = Field(
        default=None, description="The new summary; leave it out to keep the current one, null to clear it."
    )
    add_questions: list[Annotated[Text, Field(max_length=QUESTION_MAX_CHARS)]] = Field(
        default_factory=list, description="Open questions to add, each its text."
    )
    resolve_questions: list[Annotated[str, Field(min_length=1, max_length=200)]] = Field(
        default_factory=list, description="The ids of open questions this update resolves."
    )


class UpdateCheckpointRequest(CheckpointEdit):
    workspace_id: str = id_field("The workspace whose checkpoint this updates (ws_…).")


class ProposeRequest(Model):
    """What runhost sends at the end of a run. The first revision is made with `expected_revision` 0."""

    workspace_id: str = Id
    expected_revision: StrictInt = Field(ge=0, le=INT32_MAX)
    summary: str
    add_questions: list[str] = Field(default_factory=list)
    resolve_questions: list[str] = Field(default_factory=list)
    derived_from: DerivedFrom = Field(default_factory=DerivedFrom)
    # The run's question: an open question it asked and did not leave open again is resolved by it.
    question: str | None = Field(default=None, max_length=4000)


class RawProposal(Model):
    """The same message as `ProposeRequest`, accepted loosely at the edge.

    A malformed proposal must answer `invalid` (and never fail the run), so the fields are checked by the
    service against `ProposeRequest` instead of being refused by the envelope.
    """

    workspace_id: str = Id
    expected_revision: Any = None
    summary: Any = None
    add_questions: Any = None
    resolve_questions: Any = None
    derived_from: Any = None
    question: Any = None


class ProposeReply(Model):
    result: Literal["applied", "stale", "invalid"]
    revision: int | None
    reason: str | None = None


# -- drift -------------------------------------------------------------------------------------------

DriftReason = Literal["new_version", "withdrawn", "retired"]


class DriftRequest(PageRequest):
    workspace_id: str = Id


class Drift(Model):
    """A ref the workspace's checkpoint or associated publications cite, changed since it was cited."""

    ref: Ref
    cited_by: list[Ref]
    new_version: int | None
    reason: DriftReason
    detected_at: datetime


class DriftList(Page):
    items: list[Drift]


class DriftDetected(Drift):
    workspace_id: str


class CitationChanged(Model):
    """A version that a publication version cites changed: the workspace re-checks that publication's claims
    (services/workspace/staleness.py). One per citing publication version, whatever workspace it is in."""

    publication: Ref
    ref: Ref
    reason: DriftReason
    now: Ref | None


# -- events ------------------------------------------------------------------------------------------


class WorkspaceCreated(Model):
    workspace_id: str
    title: str
    goal_version: int


class GoalRevised(Model):
    workspace_id: str
    version: int


class WorkspaceChanged(Model):
    """Payload of `workspace.archived`, `workspace.unarchived` and `workspace.deleted`."""

    workspace_id: str


class CheckpointRevised(Model):
    workspace_id: str
    revision: int
    author: Author
    run_id: str | None


# The events this service publishes through its outbox: type, payload, meaning.
EVT_CREATED = EventType("workspace.created", WorkspaceCreated, "A workspace was created with its first goal.")
EVT_GOAL_REVISED = EventType("workspace.goal_revised", GoalRevised, "A workspace's goal got a new version.")
EVT_ARCHIVED = EventType("workspace.archived", WorkspaceChanged, "A workspace was archived: it admits no new runs.")
EVT_UNARCHIVED = EventType("workspace.unarchived", WorkspaceChanged, "An archived workspace is active again.")
EVT_DELETED = EventType(
    "workspace.deleted", WorkspaceChanged, "A workspace was deleted; what other services own is left as it is."
)
EVT_CHECKPOINT_REVISED = EventType(
    "workspace.checkpoint_revised",
    CheckpointRevised,
    "A workspace's checkpoint got a new revision, by a person, a run's proposal or the system (a drift).",
)
EVT_ASSOCIATION_REFUSED = EventType(
    "workspace.association_refused",
    AssociationRefused,
    "An association asked for by an event was refused: the workspace is deleted, missing or archived.",
)
EVT_DRIFT_DETECTED = EventType(
    "workspace.drift_detected",
    DriftDetected,
    "A ref the workspace cites got a new version, or was withdrawn or retired.",
)
EVT_CITATION_CHANGED = EventType(
    "workspace.citation_changed",
    CitationChanged,
    "A version a publication version cites got a successor, or was withdrawn or retired: its claims are re-checked.",
    # Its own: the re-check runs outside the transaction that recorded the drift (services/workspace/staleness.py).
    consumers=("workspace",),
)


# The request subjects this service answers: name, request, reply, what it answers.
CREATE = Subject(
    "dossier.workspace.create",
    CreateRequest,
    Workspace,
    "Creates a workspace with its title and goal.",
    callers=("gateway",),
)
LIST = Subject(
    "dossier.workspace.list",
    ListRequest,
    WorkspaceList,
    "A page of the scope's workspaces, newest first.",
    callers=("gateway",),
)
GET = Subject(
    "dossier.workspace.get",
    WorkspaceIdRequest,
    Workspace,
    "One live workspace with its current goal.",
    callers=("gateway", "runhost"),
)
REVISE_GOAL = Subject(
    "dossier.workspace.goal.revise",
    ReviseGoalRequest,
    Workspace,
    "A new version of the goal, on the version the caller expects to be current.",
    callers=("gateway",),
)
GOAL_VERSIONS = Subject(
    "dossier.workspace.goal.versions",
    WorkspacePageRequest,
    GoalVersions,
    "A page of the goal's versions, oldest first.",
    callers=("gateway",),
)
ARCHIVE = Subject(
    "dossier.workspace.archive",
    WorkspaceIdRequest,
    Workspace,
    "Archives a workspace (again: nothing changes).",
    callers=("gateway",),
)
UNARCHIVE = Subject(
    "dossier.workspace.unarchive",
    WorkspaceIdRequest,
    Workspace,
    "Makes an archived workspace active again.",
    callers=("gateway",),
)
DELETE = Subject(
    "dossier.workspace.delete",
    WorkspaceIdRequest,
    DeleteReply,
    "Deletes a workspace, keeping only the tombstone that reserves its id.",
    callers=("gateway",),
)
CATALOG = Subject(
    "dossier.workspace.catalog",
    CatalogRequest,
    Catalog,
    "A page of a workspace's catalog (the analyst's material, then the runs' current and superseded"
    " publications), each item checked with its owner.",
    callers=("gateway",),
)
CATALOG_ADMITTED = Subject(
    "dossier.workspace.catalog.admitted",
    AdmittedCatalogRequest,
    Catalog,
    "Internal, for runhost: a later page of a run's catalog, as it was when the run was admitted.",
    callers=("runhost",),
)
CATALOG_HOLDS = Subject(
    "dossier.workspace.catalog.holds",
    CatalogHoldsRequest,
    CatalogHolds,
    "Internal, for runhost: whether a run's catalog as admitted holds an item (the run may read it).",
    callers=("runhost",),
)
CATALOG_BROWSE = Subject(
    "dossier.workspace.catalog.browse",
    CatalogBrowseRequest,
    CatalogPage,
    "A page of a workspace's associations of some kinds, newest first, with how many there are.",
    callers=("gateway",),
)
ADMISSION = Subject(
    "dossier.workspace.admission",
    AdmissionRequest,
    Admission,
    "Internal, for runhost: the snapshot a run freezes, and associations of conversations, runs and outputs.",
    callers=("runhost",),
)
ADD_SOURCE = Subject(
    "dossier.workspace.sources.add",
    AddSourceRequest,
    Association,
    "Associates a source with a workspace once the assets service confirms it is usable in the scope.",
    callers=("gateway",),
)
PIN_ARTIFACT = Subject(
    "dossier.workspace.artifacts.pin",
    PinRequest,
    PinReply,
    "The artifact service retains the file, then the workspace records the link; both are reported.",
    callers=("gateway", "runhost"),
)
ASSOCIATE = Subject(
    "dossier.workspace.associate",
    AssociateRequest,
    AssociateReply,
    "Records an association of a conversation, run or output with a workspace, or says why it is refused.",
    callers=("runhost",),
)
CHECKPOINT_GET = Subject(
    "dossier.workspace.checkpoint.get",
    WorkspaceIdRequest,
    Checkpoint,
    "A workspace's current checkpoint.",
    callers=("gateway", "runhost"),
)
CHECKPOINT_UPDATE = Subject(
    "dossier.workspace.checkpoint.update",
    UpdateCheckpointRequest,
    Checkpoint,
    "A person's edit of the checkpoint, on the revision the caller expects to be current.",
    callers=("gateway",),
)
CHECKPOINT_REVISIONS = Subject(
    "dossier.workspace.checkpoint.revisions",
    WorkspacePageRequest,
    CheckpointRevisions,
    "A page of the checkpoint's revisions.",
    callers=("gateway",),
)
CHECKPOINT_PROPOSE = Subject(
    "dossier.workspace.checkpoint.propose",
    RawProposal,
    ProposeReply,
    "From runhost at the end of a run: a proposed revision, answered applied, stale or invalid (never an error).",
    callers=("runhost",),
)
DRIFT = Subject(
    "dossier.workspace.drift",
    DriftRequest,
    DriftList,
    "A page of the refs the workspace cites that changed since they were cited.",
    callers=("gateway",),
)
