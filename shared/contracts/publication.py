"""Bus contract of the publication service."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import ConfigDict, Field

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
    StrictInt,
    Subject,
    Text,
    id_field,
)

Id = Field(min_length=1, max_length=200)
PUBLICATION_SEARCH_OFFSET_MAX = 100_000


class NewPublication(Model):
    """The body of `POST /v1/publications`."""

    title: Text = Field(min_length=1)
    body: Text
    workspace_id: str | None = Field(default=None, max_length=200)


Support = Literal["supported", "weak", "unsupported"]
StaleReason = Literal["new_version", "withdrawn", "retired"]
MAX_CLAIMS = 1000


class Stale(Model):
    """A version a claim cites has changed since the claim was checked: it got a successor (`now`, whose text
    was checked again: `support_now`), or it was withdrawn or retired (`now` and `support_now` null)."""

    ref: Ref
    reason: StaleReason
    now: Ref | None = None
    # Null when there is no successor, or its text could not be read when the change was handled.
    support_now: Support | None = None


class Claim(Model):
    """One cited sentence of a run's answer, checked against the exact passage it cites."""

    text: str = Field(max_length=4000)
    refs: list[Ref] = Field(max_length=50)
    support: Support
    score: float = Field(ge=0, le=1)
    # The locator each ref was read at, in the order of `refs` (null for a publication, which has none).
    locators: list[str | None] = Field(default_factory=list, max_length=50)
    stale: Stale | None = None


class CommitRequest(NewPublication):
    run_id: str | None = Field(default=None, max_length=200)
    # When the evidence that the sources name began to be read: a run's start. A change of a cited version
    # made after it is a drift even when it came before the commit (services/workspace/drift.py).
    evidence_since: datetime | None = None
    sources: list[Ref] = Field(default_factory=list, max_length=1000)
    # Makes a retried commit (a run's retried finish) return the first publication instead of a second.
    request_key: str | None = Field(default=None, min_length=1, max_length=200)
    # A run's answer, sentence by sentence: what each cited passage supports (runhost checks them).
    claims: list[Claim] = Field(default_factory=list, max_length=MAX_CLAIMS)


class GetRequest(PageRequest):
    """The publication with a page of its versions."""

    id: str = Id


class ReadRequest(Model):
    id: str = id_field("The publication (pub_…).")
    version: int = Field(ge=1, le=INT32_MAX, description="The exact version to read.")


class PublicationSearchRequest(Model):
    """A run's search over the publications of its own workspace (the workspace comes from its grant)."""

    q: str = Field(min_length=1, max_length=1000, pattern=NOT_BLANK)
    limit: int = Field(default=5, ge=1, le=100)
    # The run's search pages its publication hits by rank (services/runhost/search.py): this many are skipped.
    offset: int = Field(default=0, ge=0, le=PUBLICATION_SEARCH_OFFSET_MAX)


class PublicationHit(Model):
    """The latest active version of a publication whose title or body matched; read it by id and version."""

    id: str
    version: int
    title: str
    created_at: datetime
    run_id: str | None
    snippet: str
    score: float


class PublicationSearchReply(Model):
    items: list[PublicationHit]


class ClaimsRequest(ReadRequest, PageRequest):
    """A page of one version's checked claims, in the order of the answer."""


class ClaimList(Page):
    items: list[Claim]


class StaleMark(Model):
    """One claim of a version (its place in the answer, from 0) and what changed under it. For a publication's
    successor, the publication service checks the claim against the successor's body itself (`support_now`
    is left null by the sender)."""

    index: int = Field(ge=0, lt=MAX_CLAIMS)
    stale: Stale


class MarkStaleRequest(Model):
    """The workspace's re-check of a version's claims after a version they cite changed."""

    id: str = Id
    version: int = Field(ge=1, le=INT32_MAX)
    marks: list[StaleMark] = Field(max_length=MAX_CLAIMS)


class MarkStaleReply(Model):
    # How many claims now show the change (a mark that an earlier, weightier one outranks is not kept).
    marked: int


class Revision(Model):
    """The body of `POST /v1/publications/{id}/versions`."""

    body: Text
    title: Text | None = Field(default=None, min_length=1)
    expected_latest_version: StrictInt = Field(ge=1, le=INT32_MAX)


class ReviseRequest(Revision):
    id: str = Id
    run_id: str | None = Field(default=None, max_length=200)
    sources: list[Ref] = Field(default_factory=list, max_length=1000)


class Withdrawal(Model):
    """The body of `POST /v1/publications/{id}/versions/{v}/withdraw`."""

    reason: str = Field(min_length=1, max_length=2000)


class WithdrawRequest(Withdrawal):
    id: str = Id
    version: int = Field(ge=1, le=INT32_MAX)


VersionStatus = Literal["active", "withdrawn"]


class PublicationVersion(Model):
    id: str
    version: int
    title: str
    body: str
    content_hash: str
    sources: list[Ref]
    run_id: str | None
    status: VersionStatus
    created_at: datetime


class VersionSummary(Model):
    version: int
    content_hash: str
    status: VersionStatus
    run_id: str | None
    created_at: datetime


class Publication(Page):
    """`versions` oldest first, one page of them; `next_cursor` pages on through the versions."""

    id: str
    title: str
    latest_version: int
    versions: list[VersionSummary]


class VersionEvent(Model):
    """Payload of `publication.committed` / `publication.revised` / `publication.withdrawn`."""

    id: str
    version: int
    title: str
    content_hash: str
    workspace_id: str | None
    run_id: str | None
    sources: list[Ref]
    created_at: datetime
    reason: str | None = None
    # The commit's `evidence_since` (a run's answer): its sources were read from then on.
    evidence_since: datetime | None = None


class DiffRequest(Model):
    """Two versions of one publication, each read under the same rules as `READ`."""

    model_config = ConfigDict(validate_by_name=True, validate_by_alias=True, serialize_by_alias=True)

    id: str = Id
    from_: int = Field(alias="from", ge=1, le=INT32_MAX)
    to: int = Field(ge=1, le=INT32_MAX)


DiffOp = Literal["context", "removed", "added"]


class DiffLine(Model):
    op: DiffOp
    text: str
    # 1-based line numbers in the `from` and `to` bodies; null on the side the line is not in.
    from_line: int | None
    to_line: int | None


class DiffHunk(Model):
    from_start: int
    from_count: int
    to_start: int
    to_count: int
    lines: list[DiffLine]


class Diff(Model):
    """A line diff of two bodies (`from` → `to`), with three lines of context around each change."""

    model_config = ConfigDict(validate_by_name=True, validate_by_alias=True, serialize_by_alias=True)

    id: str
    from_: int = Field(alias="from")
    to: int
    hunks: list[DiffHunk]
    # True when the diff was cut at the service's line bound; the hunks given are still exact.
    truncated: bool = False


# The events this service publishes through its outbox: type, payload, meaning.
# The workspace follows them: associations and titles, what each version cites, and drift.
EVT_COMMITTED = EventType(
    "publication.committed", VersionEvent, "A new publication was committed at version 1.", consumers=("workspace",)
)
EVT_REVISED = EventType(
    "publication.revised", VersionEvent, "A publication got a new version.", consumers=("workspace",)
)
EVT_WITHDRAWN = EventType(
    "publication.withdrawn",
    VersionEvent,
    "A version of a publication was withdrawn (`reason` says why).",
    consumers=("workspace",),
)


# The request subjects this service answers: name, request, reply, what it answers.
COMMIT = Subject(
    "dossier.publication.commit",
    CommitRequest,
    PublicationVersion,
    "A new publication at version 1; its `request_key` again with the same parameters answers the same one.",
    callers=("gateway", "runhost"),
)
GET = Subject(
    "dossier.publication.get",
    GetRequest,
    Publication,
    "A publication with one page of its versions.",
    callers=("gateway",),
)
READ = Subject(
    "dossier.publication.read",
    ReadRequest,
    PublicationVersion,
    "One exact version; with a run grant, only one the run was admitted with or found by its own search.",
    callers=("gateway", "runhost"),
    batched=True,
)
RUN_SEARCH = Subject(
    "dossier.publication.run_search",
    PublicationSearchRequest,
    PublicationSearchReply,
    "With a run grant: the latest active versions of the run's workspace's publications matching the query.",
    callers=("runhost",),
)
CLAIMS = Subject(
    "dossier.publication.claims",
    ClaimsRequest,
    ClaimList,
    "A page of a version's checked claims, under the rules of reading it (a withdrawn one is unavailable).",
    callers=("gateway", "workspace"),
)
MARK_STALE = Subject(
    "dossier.publication.claims.mark_stale",
    MarkStaleRequest,
    MarkStaleReply,
    "Marks claims of a version as resting on a changed version, with the successor's support (a publication's it checks).",
    callers=("workspace",),
)
REVISE = Subject(
    "dossier.publication.revise",
    ReviseRequest,
    PublicationVersion,
    "A new version of a publication, on the version the caller expects to be the latest.",
    callers=("gateway",),
)
WITHDRAW = Subject(
    "dossier.publication.withdraw",
    WithdrawRequest,
    PublicationVersion,
    "Withdraws one version with a reason; withdrawing it again answers it as it is.",
    callers=("gateway",),
)
DIFF = Subject(
    "dossier.publication.diff",
    DiffRequest,
    Diff,
    "A line diff of two versions of a publication, each read under the rules of READ.",
    callers=("gateway",),
)
CHECK = Subject(
    "dossier.publication.check",
    CheckRequest,
    CheckReply,
    "Which of these refs of kind `publication` the actor may cite: identity, exact version, hash and state.",
    callers=("runhost", "workspace"),
)
