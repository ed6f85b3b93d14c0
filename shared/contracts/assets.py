"""Bus contract of the assets service: acquisition, versions, evidence, eligibility, and its events."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field

from shared.contracts.common import (
    INT32_MAX,
    NOT_BLANK,
    CheckReply,
    CheckRequest,
    EventType,
    Model,
    Page,
    PageRequest,
    Ref,
    Subject,
    id_field,
)

# A source id is chosen by people and tools (often a file name); it must fit in a URL path segment.
SOURCE_ID_PATTERN = r"^[^/\x00-\x1f\x7f]{1,200}$"
# Every asset version's id (services/assets/service.py `new_asset_id`).
ASSET_ID_REGEX = r"ast_[0-9a-f]{32}"
SourceId = Field(pattern=SOURCE_ID_PATTERN)
Sha256 = Field(pattern=r"^[0-9a-f]{64}$")

Kind = Literal["pdf", "docx", "xlsx", "html", "text"]
# `registered` and `extracting` are transient: an upload's reply always waits for a settled state.
VersionStatus = Literal["registered", "extracting", "active", "failed", "superseded", "retired"]
ExtractionStatus = Literal["complete", "partial", "failed"]


class BlobRef(Model):
    """Where the bytes are. Bytes never travel on the bus."""

    bucket: str = Field(min_length=1, max_length=200)
    key: str = Field(min_length=1, max_length=1000)
    sha256: str = Sha256
    size: int = Field(ge=0)


class UploadRequest(Model):
    source_id: str = SourceId
    blob: BlobRef
    filename: str | None = Field(default=None, max_length=500)
    workspace_id: str | None = Field(default=None, min_length=1, max_length=200)


class ImportRequest(Model):
    root: str = Field(min_length=1, max_length=100)
    path: str = Field(min_length=1, max_length=4096)
    source_id: str = SourceId
    workspace_id: str | None = Field(default=None, min_length=1, max_length=200)


class AttachRequest(Model):
    """A run-local attachment; needs the run's grant, and is visible only to that run until promoted."""

    source_id: str = SourceId
    blob: BlobRef
    filename: str | None = Field(default=None, max_length=500)


class PromoteRequest(Model):
    """Make a run-local attachment a version of a source of the scope (needs the same run's grant)."""

    asset_id: str = Field(min_length=1, max_length=200)
    source_id: str | None = Field(default=None, pattern=SOURCE_ID_PATTERN)
    workspace_id: str | None = Field(default=None, min_length=1, max_length=200)


class GetSourceRequest(PageRequest):
    """The source with a page of its versions."""

    source_id: str = SourceId
    # With a run grant: the run's own attachment of that name instead of the scope's source.
    run_local: bool = False


class RetireRequest(Model):
    source_id: str = SourceId


class GetAssetRequest(Model):
    asset_id: str = Field(min_length=1, max_length=200)


class SearchRequest(Model):
    q: str = Field(min_length=1, max_length=1000, pattern=NOT_BLANK, description="What to search for (full text).")
    source_id: str | None = Field(
        default=None, pattern=SOURCE_ID_PATTERN, description="Only this source's passages; leave it out for all."
    )
    limit: int = Field(default=10, ge=1, le=100, description="How many hits at most.")


class EvidenceReadRequest(Model):
    evidence_id: str = id_field("The evidence id of a search hit.")


class LocateRequest(Model):
    source_id: str = SourceId
    version: int = Field(ge=1, le=INT32_MAX)
    locator: str = Field(min_length=1, max_length=1000)


class VersionRequest(Model):
    source_id: str = SourceId
    version: int = Field(ge=1, le=INT32_MAX)


class PassagesRequest(VersionRequest, PageRequest):
    """A page of the version's passages in document order (the rules of `READ`: an active version only)."""


class Passage(Model):
    evidence_id: str
    locator: str
    text: str
    ocr: bool = False


class PassageList(Page):
    items: list[Passage]


class Original(Model):
    """Where the version's original bytes are (bytes never travel on the bus); a retired source has none."""

    source_id: str
    version: int
    bucket: str
    key: str
    sha256: str
    size: int
    kind: Kind
    filename: str | None


class Extraction(Model):
    status: ExtractionStatus
    units_total: int
    units_extracted: int
    notes: list[str]


class AssetVersion(Model):
    asset_id: str
    source_id: str
    version: int
    content_hash: str
    kind: Kind
    size: int
    status: VersionStatus
    reused: bool
    # Null while the version is registered or extracting.
    extraction: Extraction | None
    error: str | None
    created_at: datetime
    filename: str | None = None
    # The run that attached it (run_local) or whose attachment was promoted into it.
    run_id: str | None = None
    run_local: bool = False


class Source(Page):
    """`versions` oldest first, one page of them; `next_cursor` pages on through the versions."""

    source_id: str
    active_version: int | None
    versions: list[AssetVersion]


class SearchHit(Model):
    evidence_id: str
    asset_id: str
    source_id: str
    version: int
    locator: str
    # Highlights are between `<<` and `>>`; a document's own `<` and `>` are shown as `‹` and `›`.
    snippet: str
    score: float
    # The passage was read by OCR from an image of text (a scan), so its characters may be wrong.
    ocr: bool = False


class SearchReply(Model):
    items: list[SearchHit]


class Evidence(Model):
    """One delivered passage: exactly this locator of exactly this version (whose hash is given)."""

    evidence_id: str
    asset_id: str
    source_id: str
    version: int
    locator: str
    text: str
    content_hash: str
    kind: Kind
    ocr: bool = False


class VersionActivated(Model):
    source_id: str
    asset_id: str
    version: int
    content_hash: str
    kind: Kind
    filename: str | None
    run_id: str | None
    extraction: Extraction
    superseded: Ref | None
    created_at: datetime


class VersionFailed(Model):
    source_id: str
    asset_id: str
    version: int
    content_hash: str
    error: str
    run_id: str | None


class SourceRetired(Model):
    source_id: str
    versions: list[int]


class AssociationRequested(Model):
    workspace_id: str
    source_id: str
    asset_id: str
    version: int


# The events this service publishes through its outbox: type, payload, meaning.
# The workspace follows a source's new versions and retirement for drift.
EVT_VERSION_ACTIVATED = EventType(
    "asset.version_activated",
    VersionActivated,
    "A version of a source was extracted and is now the one reads, search and citations use.",
    consumers=("workspace",),
)
EVT_VERSION_FAILED = EventType(
    "asset.version_failed", VersionFailed, "A version of a source could not be extracted; it is never read."
)
EVT_SOURCE_RETIRED = EventType(
    "asset.source_retired",
    SourceRetired,
    "A source and its settled versions were retired: none can be read or cited.",
    consumers=("workspace",),
)
# Consumed by the workspace service: associate `source_id` with `workspace_id` (recorded with the version).
EVT_ASSOCIATION_REQUESTED = EventType(
    "asset.association_requested",
    AssociationRequested,
    "An upload, import or promotion named a workspace: the workspace service associates the source with it.",
    consumers=("workspace",),
)


# The request subjects this service answers: name, request, reply, what it answers.
UPLOAD = Subject(
    "dossier.assets.upload",
    UploadRequest,
    AssetVersion,
    "A new version of a source from bytes already in object storage, answered once it is extracted or failed.",
    callers=("gateway",),
)
IMPORT = Subject(
    "dossier.assets.import",
    ImportRequest,
    AssetVersion,
    "A new version of a source from a file under an approved import root, answered once it is settled.",
    callers=("gateway",),
)
ATTACH = Subject(
    "dossier.assets.attach",
    AttachRequest,
    AssetVersion,
    "With a run grant: a run-local attachment, visible to that run alone until it is promoted.",
    callers=(),
)
PROMOTE = Subject(
    "dossier.assets.promote",
    PromoteRequest,
    AssetVersion,
    "With the same run's grant: a run's attachment becomes a version of a source of the scope.",
    callers=(),
)
GET_SOURCE = Subject(
    "dossier.assets.source.get",
    GetSourceRequest,
    Source,
    "A source of the scope with one page of its versions.",
    callers=("gateway",),
)
GET_ASSET = Subject(
    "dossier.assets.get", GetAssetRequest, AssetVersion, "One asset version by its id.", callers=("gateway",)
)
RETIRE = Subject(
    "dossier.assets.source.retire",
    RetireRequest,
    Source,
    "Retires a source and every settled version of it; versions still extracting retire when they settle.",
    callers=("gateway",),
)
CHECK = Subject(
    "dossier.assets.check",
    CheckRequest,
    CheckReply,
    "Which of these refs of kind `source` the actor may cite.",
    callers=("runhost", "workspace"),
)
SEARCH = Subject(
    "dossier.assets.evidence.search",
    SearchRequest,
    SearchReply,
    "Passages of active versions matching any term of the query, those matching more terms first.",
    callers=("gateway", "runhost", "workspace"),
)
READ = Subject(
    "dossier.assets.evidence.read",
    EvidenceReadRequest,
    Evidence,
    "One passage by its evidence id: exactly that locator of that version, with the version's hash.",
    callers=("gateway", "runhost"),
)
PASSAGES = Subject(
    "dossier.assets.source.passages",
    PassagesRequest,
    PassageList,
    "A person's view of one source version: its extracted passages in order, and where its original bytes are.",
    callers=("gateway",),
)
ORIGINAL = Subject(
    "dossier.assets.source.original",
    VersionRequest,
    Original,
    "Where a version's original bytes are in object storage (the bytes never travel on the bus).",
    callers=("gateway",),
)
LOCATE = Subject(
    "dossier.assets.evidence.locate",
    LocateRequest,
    Evidence,
    "The passage of a source version at a locator (as a ledger row names it), read under the rules of READ.",
    callers=("gateway", "workspace"),
)
