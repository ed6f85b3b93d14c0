"""Bus contract of the artifact service: retained HTML files, their retention and expiry, eligibility."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import AwareDatetime, Field

from shared.contracts.common import CheckReply, CheckRequest, EventType, Model, Subject, Text

MEDIA_TYPE_HTML = "text/html"

Id = Field(min_length=1, max_length=200)


class RegisterRequest(Model):
    """Bytes are already in object storage under their content key; only the reference travels."""

    bucket: str = Field(min_length=1, max_length=200)
    key: str = Field(min_length=1, max_length=1000)
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    size: int = Field(ge=1)
    title: Text = Field(min_length=1)
    media_type: Literal["text/html"]
    expires_at: AwareDatetime | None = None


class Artifact(Model):
    id: str
    title: str
    media_type: str
    size: int
    content_hash: str
    created_at: datetime
    expires_at: datetime | None


class ArtifactIdRequest(Model):
    artifact_id: str = Id


class ArtifactLocation(Model):
    artifact: Artifact
    bucket: str
    key: str


class RetainRequest(Model):
    artifact_id: str = Id
    # None keeps the file with no expiry; a retention never shortens an earlier one.
    expires_at: AwareDatetime | None = None


class Retention(Model):
    artifact_id: str
    status: Literal["retained"]
    retained_at: datetime
    expires_at: datetime | None


# The events this service publishes through its outbox: type, payload, meaning.
EVT_REGISTERED = EventType("artifact.registered", Artifact, "A file was registered as an artifact of the scope.")
EVT_RETAINED = EventType("artifact.retained", Retention, "An artifact's retention was set or extended.")


# The request subjects this service answers: name, request, reply, what it answers.
REGISTER = Subject(
    "dossier.artifact.register",
    RegisterRequest,
    Artifact,
    "Registers an HTML file already in object storage (checked against its hash and size) as an artifact.",
    callers=("gateway", "runhost"),
)
GET = Subject(
    "dossier.artifact.get",
    ArtifactIdRequest,
    Artifact,
    "One artifact of the scope, unless expired.",
    callers=("gateway",),
)
OPEN = Subject(
    "dossier.artifact.open",
    ArtifactIdRequest,
    ArtifactLocation,
    "Internal: where the bytes are, answered only after scope, expiry and the hash reference are checked.",
    callers=("gateway",),
)
RETAIN = Subject(
    "dossier.artifact.retain",
    RetainRequest,
    Retention,
    "Keeps an artifact until the given expiry (none: for ever); never shortens an earlier retention.",
    callers=("workspace",),
)
CHECK = Subject(
    "dossier.artifact.check",
    CheckRequest,
    CheckReply,
    "Which of these refs of kind `artifact` the actor may cite.",
    callers=("workspace",),
)
