"""The API's JSON as typed models, mirrored from the server's contracts (docs/api.md, `GET /openapi.json`).

The client is installed without the server's packages, so it keeps its own copy of each shape. Fields the
server adds later are kept (`extra="allow"`) rather than refused: an older client reads a newer server.
`tests/unit/client/test_models.py` holds every field here to the server's OpenAPI document.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

RunStatus = Literal["admitted", "running", "completed", "failed", "cancelled"]
FINAL_STATUSES: tuple[RunStatus, ...] = ("completed", "failed", "cancelled")


class Model(BaseModel):
    model_config = ConfigDict(extra="allow")


class Ref(Model):
    """One thing at one version: `kind` is publication, source, artifact or evidence."""

    kind: str
    id: str
    version: int | None = None


class PublicationRef(Model):
    id: str
    version: int


class HistoryRef(Model):
    publication_id: str
    version: int


class Lease(Model):
    """An external run's lease: the secret token, its epoch (a take-over makes a new one) and expiry."""

    token: str
    epoch: int
    expires_at: datetime


class LeaseState(Model):
    epoch: int
    expires_at: datetime | None
    holder: str | None


class RunStats(Model):
    steps: int = 0
    model_requests: int = 0
    model_input_chars_max: int = 0
    model_input_chars_total: int = 0
    source_chars_read: int = 0
    tokens_in: int | None = None
    tokens_out: int | None = None
    claims_supported: int = 0
    claims_weak: int = 0
    claims_unsupported: int = 0


class CatalogItem(Model):
    kind: str
    id: str
    version: int | None
    title: str
    created_at: datetime
    run_id: str | None
    available: bool
    reason: str | None

    @property
    def ref(self) -> Ref:
        return Ref(kind=self.kind, id=self.id, version=self.version)


class Catalog(Model):
    items: list[CatalogItem]
    complete: bool
    omitted: int


class CheckpointProposalResult(Model):
    status: str
    revision: int | None = None


class Run(Model):
    id: str
    workspace_id: str
    conversation_id: str
    request_id: str
    status: RunStatus
    question: str
    model: str
    goal_version: int
    history: list[HistoryRef]
    catalog: Catalog
    publication: PublicationRef | None
    checkpoint_proposal: CheckpointProposalResult
    workspace_association: str
    error: str | None
    # With `error: "limit_reached"`: `{limit, value}`, the limit by its admission name.
    error_details: dict[str, Any] | None = None
    created_at: datetime
    finished_at: datetime | None
    stats: RunStats = Field(default_factory=RunStats)
    driver: str = "dossier"
    lease: Lease | None = None
    lease_state: LeaseState | None = None

    @property
    def final(self) -> bool:
        return self.status in FINAL_STATUSES


class Hit(Model):
    """A search hit of a run: a passage (`ref` its source version, read by `evidence_id`) or an earlier
    publication of the workspace (`ref` its exact version, no `evidence_id` nor `locator`)."""

    evidence_id: str | None
    ref: Ref
    locator: str | None
    snippet: str

    @property
    def key(self) -> str:
        """What to read: the evidence id of a passage, else `pub_…@vN` (what `RunSession.read` takes)."""
        return self.evidence_id or f"{self.ref.id}@v{self.ref.version}"


class Passage(Model):
    """What a run read: the material at its exact version, kept in the run's files at `path`."""

    ref: Ref
    locator: str | None
    content_hash: str | None
    text: str
    path: str
    # The evidence id it was read by, when it was: the client's own note, not a field of the API's answer.
    _evidence_id: str | None = PrivateAttr(default=None)

    @property
    def evidence_id(self) -> str | None:
        return self._evidence_id

    def cite(self) -> str:
        """The citation of this passage in an answer: `source@vN locator`, or `pub_…@vN`."""
        version = f"{self.ref.id}@v{self.ref.version}"
        return f"{version} {self.locator}" if self.locator else version


class FileEntry(Model):
    path: str
    size: int


class ResumeRead(Model):
    ref: Ref
    locator: str | None
    path: str


class Resume(Model):
    """What a fresh session needs to go on without reading anything twice."""

    plan: str | None
    files: list[FileEntry]
    reads: list[ResumeRead]


class TakeOver(Model):
    lease: Lease
    resume: Resume


class LedgerRow(Model):
    seq: int
    stage: str
    ref: Ref | None
    content_hash: str | None
    locator: str | None
    reason: str | None
    model_request: str | None
    at: datetime


class Goal(Model):
    version: int
    text: str
    created_at: datetime


class Workspace(Model):
    id: str
    title: str
    status: str
    goal: Goal
    created_at: datetime
    updated_at: datetime


class PublicationVersion(Model):
    id: str
    version: int
    title: str
    body: str
    content_hash: str
    sources: list[Ref]
    run_id: str | None
    status: str
    created_at: datetime


class Extraction(Model):
    status: str
    units_total: int
    units_extracted: int
    notes: list[str]


class AssetVersion(Model):
    asset_id: str
    source_id: str
    version: int
    content_hash: str
    kind: str
    size: int
    status: str
    reused: bool
    extraction: Extraction | None
    error: str | None
    created_at: datetime


class EvidenceHit(Model):
    evidence_id: str
    asset_id: str
    source_id: str
    version: int
    locator: str
    snippet: str
    score: float


class Evidence(Model):
    evidence_id: str
    asset_id: str
    source_id: str
    version: int
    locator: str
    text: str
    content_hash: str
    kind: str


class CheckpointUpdate(Model):
    """What a finished run proposes for the workspace's checkpoint."""

    summary: str | None = None
    add_questions: list[str] = Field(default_factory=list)


_CITED = re.compile(r"^(?P<id>\S+)@v(?P<version>[0-9]+)(?:\s+(?P<locator>\S.*))?$")


def ref_to_read(target: Hit | Ref | Passage | ResumeRead | dict[str, Any] | str) -> dict[str, Any]:
    """The body of a run's read for what a caller names: a hit, a ref, a passage or resumed read (read
    again), a dict in the API's shape, an evidence id, `pub_…@vN`, or `source@vN locator`."""
    if isinstance(target, Hit):
        if target.evidence_id:
            return {"ref": {"kind": "evidence", "id": target.evidence_id}}
        return {"ref": target.ref.model_dump(include={"kind", "id", "version"})}
    if isinstance(target, Passage) and target.evidence_id:
        return {"ref": {"kind": "evidence", "id": target.evidence_id}}
    if isinstance(target, Passage | ResumeRead):
        body: dict[str, Any] = {"ref": target.ref.model_dump(include={"kind", "id", "version"})}
        return body | ({"locator": target.locator} if target.locator else {})
    if isinstance(target, Ref):
        return {"ref": target.model_dump(include={"kind", "id", "version"}, exclude_none=True)}
    if isinstance(target, dict):
        return target if "ref" in target else {"ref": target}
    text = target.strip()
    cited = _CITED.match(text)
    if cited is None:
        return {"ref": {"kind": "evidence", "id": text}}
    ref = {"id": cited["id"], "version": int(cited["version"])}
    if cited["locator"]:
        return {"ref": {"kind": "source", **ref}, "locator": cited["locator"].strip()}
    kind = "publication" if cited["id"].startswith("pub_") else "source"
    return {"ref": {"kind": kind, **ref}}
