"""Bus contract of the runhost service: admission, runs, conversations, the ledger, the run's files."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, Literal, cast

from pydantic import ConfigDict, Field, Strict

from shared.contracts.common import (
    INT32_MAX,
    NOT_BLANK,
    EventType,
    Integral,
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
from shared.contracts.workspace import CURSOR_MAX_CHARS, Catalog

RunStatus = Literal["admitted", "running", "completed", "failed", "cancelled"]
Driver = Literal["dossier", "external"]
LEASE_SECONDS_DEFAULT, LEASE_SECONDS_MIN, LEASE_SECONDS_MAX = 300, 30, 3600
# `replayed`: a model request answered from the run's model-call journal after a resume (no ref).
Stage = Literal["listed", "read", "included", "unavailable", "replayed"]
Id = Field(min_length=1, max_length=200)


class HistoryRef(Model):
    publication_id: str = id_field("An earlier publication (pub_…) the run reads exactly.")
    version: StrictInt = Field(ge=1, le=INT32_MAX, description="Its exact version.")


# A run's answer is a publication titled by its question; its HTML report is an artifact titled
# `Report of <run id>: <that title>`, which is how a page finds the report of one run among same-titled ones.
# A run's working files (docs/architecture.md): what a path may name, and what may be written over the API
# (a person: plan.md; an outside agent with the run's lease: also draft.md and notes). The gateway's path
# parameters carry the same patterns, so the OpenAPI document says what the owner refuses.
_FILE_NAME = r"[A-Za-z0-9_.@-]{1,120}"
# results/: a tool's answer kept whole where the model's window shows only its start (services/runhost/context.py).
RUN_FILE_PATTERN = (
    rf"^(plan\.md|draft\.md|catalog\.md|sources/{_FILE_NAME}\.txt|notes/{_FILE_NAME}\.md|results/{_FILE_NAME}\.md)$"
)
WRITABLE_FILE_PATTERN = rf"^(plan\.md|draft\.md|notes/{_FILE_NAME}\.md)$"

ANSWER_TITLE_CHARS = 120
# How many earlier publication versions one run may be pointed at.
HISTORY_MAX = 50
REPORT_TITLE_PREFIX = "Report of "


def short_title(question: str) -> str:
    text = " ".join(question.split())
    return text if len(text) <= ANSWER_TITLE_CHARS else text[: ANSWER_TITLE_CHARS - 1].rstrip() + "…"


class RunLimits(Model):
    """Per-run limits; each is capped by the server's own maximum."""

    max_steps: Annotated[int, Strict(), Field(ge=1, le=INT32_MAX), Integral] | None = Field(
        default=None, description="The most steps (tool calls) the run may take."
    )
    max_chars: Annotated[int, Strict(), Field(ge=1, le=INT32_MAX), Integral] | None = Field(
        default=None, description="The most characters the run may read and write."
    )
    max_seconds: float | None = Field(default=None, gt=0, description="The longest the run may take, in seconds.")
    # The model requests a run may make (each one paid for, with an endpoint that charges).
    max_model_requests: Annotated[int, Strict(), Field(ge=1, le=INT32_MAX), Integral] | None = Field(
        default=None, description="The most model requests the run may make (a run the run host's policy drives)."
    )


# How a run that ended `failed` at a limit says so: `Run.error` is this code, `Run.error_details.limit` names
# the limit (`RunLimits` field names, and `max_rereads`: the run host stops a model re-reading in a loop).
LIMIT_REACHED = "limit_reached"
LimitName = Literal["max_steps", "max_chars", "max_seconds", "max_model_requests", "max_rereads"]


# A run's policy: `scripted:<name>` replays a script of the run host's scripts folder (tests); `external`
# names the outside agent of a run with driver external, the only model such a run takes.
ModelKind = Literal["extractive", "openai", "external", "scripted"]
_SCRIPTED = "scripted:"
_SCRIPT_NAME = r"[A-Za-z0-9_-]{1,60}"
MODEL_PATTERN = rf"^(extractive|openai|external|{_SCRIPTED}{_SCRIPT_NAME})$"
# The policies of the run host's own: what a run the run host drives may name.
POLICY_PATTERN = rf"^(extractive|openai|{_SCRIPTED}{_SCRIPT_NAME})$"


@dataclass(frozen=True)
class ModelName:
    """A model name read by the one grammar of model names (`MODEL_PATTERN`): its kind, and the script's name
    of a `scripted:<name>` policy."""

    kind: ModelKind
    script: str | None = None


def parse_model(name: str) -> ModelName | None:
    """The model `name` names, or None when it is not a model name."""
    if re.fullmatch(MODEL_PATTERN, name) is None:
        return None
    if name.startswith(_SCRIPTED):
        return ModelName("scripted", name.removeprefix(_SCRIPTED))
    # Matched and not scripted: the name is its kind.
    return ModelName(cast(ModelKind, name))


LeaseSeconds = Annotated[int, Strict(), Field(ge=LEASE_SECONDS_MIN, le=LEASE_SECONDS_MAX), Integral]
LEASE_SECONDS_TOLD = (
    f"How long the lease lasts before it must be renewed, in seconds ({LEASE_SECONDS_MIN}-{LEASE_SECONDS_MAX}, "
    f"default {LEASE_SECONDS_DEFAULT})."
)


class RunAgent(Model):
    """The outside agent that drives an external run, as its provenance names it."""

    name: str = Field(
        min_length=1, max_length=200, pattern=NOT_BLANK, description="The agent's name (a program, a product)."
    )
    model: str | None = Field(
        default=None, min_length=1, max_length=200, pattern=NOT_BLANK, description="The model behind it, if any."
    )


class RunQuestion(Model):
    """What every admission asks: the question, the admission's idempotency key and the history to read."""

    question: Text = Field(min_length=1, max_length=4000, description="The research question the run answers.")
    request_id: str = id_field("Your idempotency key: the same id with the same parameters answers the same run.")
    history: list[HistoryRef] = Field(
        default_factory=list,
        max_length=HISTORY_MAX,
        description="Earlier publication versions the run reads exactly, whatever the workspace holds now.",
    )


class PolicyRunRequest(RunQuestion):
    """What a run the run host drives may ask besides: its policy, its conversation and its limits."""

    model: str | None = Field(
        default=None, pattern=MODEL_PATTERN, description="The run host's policy; leave it out for its default."
    )
    conversation_id: str | None = Field(
        default=None,
        max_length=200,
        description="A conversation (conv_…) this run continues; leave it out for a new one.",
    )
    limits: RunLimits | None = Field(default=None, description="Limits below the server's own.")


class RunRequest(PolicyRunRequest):
    """The body of `POST /v1/workspaces/{id}/runs`."""

    # The run host's rules across fields, told to clients: a run with driver external names no policy of
    # the run host's; any other run takes no lease_seconds and cannot name `external`.
    model_config = ConfigDict(
        json_schema_extra={
            "if": {"properties": {"driver": {"const": "external"}}, "required": ["driver"]},
            "then": {"properties": {"model": {"enum": ["external", None]}}},
            "else": {
                "properties": {
                    "model": {"not": {"const": "external"}},
                    "lease_seconds": {"type": "null"},
                    "agent": {"type": "null"},
                }
            },
        }
    )

    driver: Driver = Field(
        default="dossier", description="`dossier`: the run host's policy drives the run; `external`: you do."
    )
    lease_seconds: LeaseSeconds | None = Field(default=None, description=f"External runs only. {LEASE_SECONDS_TOLD}")
    agent: RunAgent | None = Field(default=None, description="External runs only: who drives the run (in its PROV).")


class AdmitRequest(RunRequest):
    workspace_id: str = id_field("The workspace (ws_…).")


class RunIdRequest(Model):
    run_id: str = id_field("The run (run_…).")


class ListRunsRequest(PageRequest):
    workspace_id: str = Id


class RunPageRequest(PageRequest):
    """A page of one run's list (ledger rows, files)."""

    run_id: str = id_field("The run (run_…).")


class ConversationRequest(PageRequest):
    """The conversation with a page of its runs."""

    conversation_id: str = Id


class ReadFileRequest(Model):
    run_id: str = id_field("The run (run_…).")
    path: str = Field(min_length=1, max_length=300, description="The file's path, as the run's file list names it.")


class WritePlanRequest(Model):
    run_id: str = Id
    text: Text


class CheckpointProposalResult(Model):
    status: Literal["applied", "stale", "invalid", "none"]
    revision: int | None = None


class RunStats(Model):
    """A run's context economy: how much its model inputs held against how much source text it read."""

    steps: int = 0
    model_requests: int = 0
    model_input_chars_max: int = 0
    model_input_chars_total: int = 0
    source_chars_read: int = 0
    tokens_in: int | None = None
    tokens_out: int | None = None
    # The answer's cited sentences, checked against the passages they cite (see the publication's claims).
    claims_supported: int = 0
    claims_weak: int = 0
    claims_unsupported: int = 0


class Lease(Model):
    """An external run's lease: the secret token (shown at admission and take-over only), its epoch, expiry."""

    token: str
    epoch: int
    expires_at: datetime


class LeaseState(Model):
    """Who holds an external run's lease now (never the token): the epoch, its expiry, the principal."""

    epoch: int
    expires_at: datetime | None
    holder: str | None


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
    workspace_association: Literal["confirmed", "refused", "pending"]
    error: str | None
    created_at: datetime
    finished_at: datetime | None
    stats: RunStats = Field(default_factory=RunStats)
    driver: Driver = "dossier"
    # An external run's outside agent, as its admission named it.
    agent: RunAgent | None = None
    # The secret lease, in the admission's and a take-over's answers only.
    lease: Lease | None = None
    # An external run's lease as anyone of its scope may see it.
    lease_state: LeaseState | None = None
    # The run's answer as an HTML report (an artifact, `GET /v1/artifacts/{id}`), once retained: it is pinned to
    # the workspace, but it is no catalog item (the run's publication is).
    report_artifact_id: str | None = None
    # What goes with `error` when it is a code: for `limit_reached`, `{limit, value}` (see LIMIT_REACHED).
    error_details: dict[str, Any] | None = None


class AdmitReply(Model):
    run: Run
    created: bool


class RunList(Page):
    """Newest first: `created_at` then `id`, both descending."""

    items: list[Run]


class ConversationRun(Model):
    id: str
    question: str
    status: RunStatus
    created_at: datetime


class Conversation(Page):
    """`runs` oldest first, one page of them; `next_cursor` pages on through the runs."""

    id: str
    workspace_id: str
    runs: list[ConversationRun]


class LedgerRow(Model):
    seq: int
    stage: Stage
    ref: Ref | None
    content_hash: str | None
    locator: str | None
    reason: str | None
    model_request: str | None
    at: datetime


class Ledger(Page):
    """In `seq` order; `totals` counts the whole run's rows by stage, whichever page this is."""

    items: list[LedgerRow]
    totals: dict[Stage, int] = Field(default_factory=dict)


class StepRequest(Model):
    """One model request of a run, as its ledger names it (`run_…:rN`, or `rN`)."""

    run_id: str = id_field("The run (run_…).")
    request_id: str = Field(min_length=1, max_length=300, description="The model request, as the ledger names it.")


class ModelStep(Model):
    """A journaled answer of the run's model to one request: its tool calls (`response`, as the journal keeps
    it: long arguments shortened once the run ended) and their results as the model's window showed them."""

    request_id: str
    epoch: int
    response: dict[str, Any]
    results: list[dict[str, Any]]
    created_at: datetime


class ModelSteps(Model):
    """Every journal row of one model request (a request answered again after a restart has more than one);
    empty for a run no model drove."""

    items: list[ModelStep]


class FileEntry(Model):
    path: str
    size: int


class FileList(Page):
    """By path. `released_at`: when the run's working files were let go (DOSSIER_RUN_RETENTION_DAYS after it
    ended); the list is then empty, while its ledger, answer, claims and PROV stay."""

    items: list[FileEntry]
    released_at: datetime | None = None


class FileText(Model):
    path: str
    text: str


class ProvDocument(Model):
    """A run's lineage as W3C PROV-JSON (https://www.w3.org/Submission/prov-json/): maps from qualified
    names (or blank ids, `_:…`) to records, each record a map of attributes to PROV-JSON literals. The
    field names are PROV-JSON's own, camelCase included."""

    prefix: dict[str, str]
    entity: dict[str, dict[str, Any]] = Field(default_factory=dict)
    activity: dict[str, dict[str, Any]] = Field(default_factory=dict)
    agent: dict[str, dict[str, Any]] = Field(default_factory=dict)
    used: dict[str, dict[str, Any]] = Field(default_factory=dict)
    wasGeneratedBy: dict[str, dict[str, Any]] = Field(default_factory=dict)
    wasDerivedFrom: dict[str, dict[str, Any]] = Field(default_factory=dict)
    wasAssociatedWith: dict[str, dict[str, Any]] = Field(default_factory=dict)
    actedOnBehalfOf: dict[str, dict[str, Any]] = Field(default_factory=dict)
    hadMember: dict[str, dict[str, Any]] = Field(default_factory=dict)


class LeaseRequest(Model):
    """A run-bound call of an external run: the run and the lease token the agent holds."""

    run_id: str = id_field("The run (run_…).")
    lease: str = Field(min_length=1, max_length=200, description="The run's lease token (rl_…).")


class SearchBody(Model):
    """What a run's search asks."""

    q: str = Field(min_length=1, max_length=1000, pattern=NOT_BLANK, description="What to search for (full text).")
    limit: int = Field(
        default=10, ge=1, le=50, description="How many hits at most, passages and publications together."
    )
    cursor: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        description="The `next_cursor` of the previous page of the same query; leave it out for the first page.",
    )


class ExternalSearchRequest(LeaseRequest, SearchBody):
    pass


CatalogCursor = Field(
    default=None,
    min_length=1,
    max_length=CURSOR_MAX_CHARS,
    description="The `next_cursor` of the page before; leave it out for the first page.",
)


class ExternalCatalogRequest(LeaseRequest):
    """A page of the run's catalog as admitted: the first without `cursor`, then the one a page's
    `next_cursor` names."""

    cursor: str | None = CatalogCursor


class RunCatalogRequest(RunIdRequest):
    """A person's read of a run's catalog as admitted (a run the run host's policy drives), page by page."""

    cursor: str | None = CatalogCursor


class ExternalReadRequest(LeaseRequest):
    ref: Ref
    locator: str | None = Field(default=None, max_length=500)


class WriteBody(Model):
    """One of a run's working files an outside agent writes, and its text."""

    path: str = Field(
        min_length=1, max_length=300, description="plan.md, draft.md or notes/<name>.md (name: letters, digits, _.@-)."
    )
    text: Text = Field(description="The file's whole new text (markdown, at most 1 MiB in UTF-8).")


class ExternalWriteRequest(LeaseRequest, WriteBody):
    pass


class CheckpointUpdate(Model):
    summary: str | None = Field(
        default=None,
        max_length=20_000,
        description="The workspace's new progress summary; leave it out for the answer's start.",
    )
    add_questions: list[str] = Field(
        default_factory=list, max_length=50, description="Open questions to add to the workspace's checkpoint."
    )


class FinishBody(Model):
    """The body of `POST /v1/runs/{id}/finish`."""

    # Blank (whitespace alone, as Python and the schema's pattern both read it) is no answer: refused as
    # invalid by the schema and the server alike.
    answer: Text = Field(
        min_length=1,
        max_length=200_000,
        description="The answer (markdown), citing `source_id@vN locator` for evidence and `pub_…@vN` for publications.",
    )
    title: str | None = Field(
        default=None, max_length=300, description="The published answer's title; leave it out for the question."
    )
    checkpoint: CheckpointUpdate | None = Field(
        default=None, description="A proposal to update the workspace's checkpoint with what the run found."
    )


class ExternalFinishRequest(LeaseRequest, FinishBody):
    pass


class TakeBody(Model):
    """The body of `POST /v1/runs/{id}/lease/take`."""

    force: bool = Field(default=False, description="Take the run even though its lease has not expired.")


class TakeRequest(TakeBody):
    run_id: str = id_field("The run (run_…).")


class ReadBody(Model):
    """The body of `POST /v1/runs/{id}/read`: a ref at its exact version; a source's passage by locator."""

    ref: Ref
    locator: str | None = Field(default=None, max_length=500)


class SourceRead(Model):
    """What a read tool of a run (read_publication, read_evidence; read_file of a source copy refused) answered:
    the run's copy of the material (`path`, its `chars`, the `ref` it holds), or, with `reason`, why it was not
    read (`not_found`, or what made the version unusable). `fresh_chars`: the characters of a first read, which
    count once in the run's `source_chars_read`. Only the fields the tool set are in its JSON."""

    path: str
    chars: int | None = None
    ref: Ref | None = None
    fresh_chars: int | None = None
    reason: str | None = None


class ExternalRead(Model):
    ref: Ref
    locator: str | None
    content_hash: str | None
    text: str
    path: str


class RunSearchHit(Model):
    """A passage (`ref` a source version; read it by `evidence_id`) or an earlier publication of the run's
    workspace (`ref` its exact version, read by that ref; no `evidence_id` nor `locator`)."""

    evidence_id: str | None
    ref: Ref
    locator: str | None
    snippet: str


class ExternalSearch(Page):
    """A page of a run's search: passages first, then publications (`next_cursor`: the next page, or null)."""

    items: list[RunSearchHit]


class ResumeRead(Model):
    ref: Ref
    locator: str | None
    path: str


class Resume(Model):
    """What a fresh agent session needs to go on without reading anything twice."""

    plan: str | None
    files: list[FileEntry]
    reads: list[ResumeRead]


class TakeReply(Model):
    lease: Lease
    resume: Resume


class RunEvent(Model):
    """Payload of every `run.*` event."""

    run_id: str
    workspace_id: str
    conversation_id: str
    status: RunStatus
    publication: PublicationRef | None = None
    error: str | None = None
    extra: dict[str, Any] = Field(default_factory=dict)


# The events this service publishes through its outbox: type, payload, meaning.
EVT_ADMITTED = EventType("run.admitted", RunEvent, "A run was admitted with its frozen snapshot of the workspace.")
EVT_STARTED = EventType("run.started", RunEvent, "A worker (or an outside agent's lease) started a run.")
EVT_COMPLETED = EventType(
    "run.completed", RunEvent, "A run finished and published its answer (`publication` names the version)."
)
EVT_FAILED = EventType("run.failed", RunEvent, "A run ended without an answer (`error` says why).")
EVT_CANCELLED = EventType("run.cancelled", RunEvent, "A run ended because it was cancelled.")


# The request subjects this service answers: name, request, reply, what it answers.
ADMIT = Subject(
    "dossier.runhost.admit",
    AdmitRequest,
    AdmitReply,
    "Admits a run on a workspace: freezes its snapshot, then a worker (or an outside agent) runs it.",
    callers=("gateway",),
)
GET_RUN = Subject(
    "dossier.runhost.run.get",
    RunIdRequest,
    Run,
    "One run of the scope with its state and results.",
    callers=("gateway",),
)
CANCEL = Subject(
    "dossier.runhost.run.cancel",
    RunIdRequest,
    Run,
    "Asks a run to stop; an external run ends at once.",
    callers=("gateway",),
)
LIST_RUNS = Subject(
    "dossier.runhost.runs.list",
    ListRunsRequest,
    RunList,
    "A page of the scope's runs, newest first.",
    callers=("gateway",),
)
GET_CONVERSATION = Subject(
    "dossier.runhost.conversation.get",
    ConversationRequest,
    Conversation,
    "A conversation with one page of its runs, oldest first.",
    callers=("gateway",),
)
LEDGER = Subject(
    "dossier.runhost.ledger",
    RunPageRequest,
    Ledger,
    "A page of a run's ledger (what it listed, read, included), with the whole run's totals by stage.",
    callers=("gateway",),
)
STEP = Subject(
    "dossier.runhost.step",
    StepRequest,
    ModelSteps,
    "One model request of a run: the model's journaled answer (its tool calls) and their results.",
    callers=("gateway",),
)
PROV = Subject(
    "dossier.runhost.run.prov", RunIdRequest, ProvDocument, "The run's lineage as W3C PROV-JSON.", callers=("gateway",)
)
LIST_FILES = Subject(
    "dossier.runhost.files.list",
    RunPageRequest,
    FileList,
    "A page of a run's working files, by path.",
    callers=("gateway",),
)
READ_FILE = Subject(
    "dossier.runhost.files.read",
    ReadFileRequest,
    FileText,
    "The text of one working file of a run.",
    callers=("gateway",),
)
WRITE_PLAN = Subject(
    "dossier.runhost.files.write_plan",
    WritePlanRequest,
    type(None),
    "A person's edit of the plan of a run that is still admitted or running; answers nothing.",
    callers=("gateway",),
)
RUN_CATALOG = Subject(
    "dossier.runhost.run.catalog",
    RunCatalogRequest,
    Catalog,
    "A page of a run's catalog as admitted, for a person (an external run's is read with its lease).",
    callers=("gateway",),
)
EXTERNAL_CATALOG = Subject(
    "dossier.runhost.external.catalog",
    ExternalCatalogRequest,
    Catalog,
    "A page of the catalog as admitted; each item recorded once as `listed`.",
    callers=("gateway",),
)
EXTERNAL_SEARCH = Subject(
    "dossier.runhost.external.search",
    ExternalSearchRequest,
    ExternalSearch,
    "For the lease holder of an external run: passages and earlier publications of its workspace matching a query.",
    callers=("gateway",),
)
EXTERNAL_READ = Subject(
    "dossier.runhost.external.read",
    ExternalReadRequest,
    ExternalRead,
    "For the lease holder of an external run: a ref at its exact version (a passage by locator), recorded as read.",
    callers=("gateway",),
)
EXTERNAL_WRITE = Subject(
    "dossier.runhost.external.write",
    ExternalWriteRequest,
    type(None),
    "For the lease holder of an external run: writes one of its working files; answers nothing.",
    callers=("gateway",),
)
EXTERNAL_RENEW = Subject(
    "dossier.runhost.external.renew",
    LeaseRequest,
    Lease,
    "Extends the lease of an external run for its holder.",
    callers=("gateway",),
)
EXTERNAL_FINISH = Subject(
    "dossier.runhost.external.finish",
    ExternalFinishRequest,
    Run,
    "Ends an external run with its answer: the cited refs are included, and the answer is published.",
    callers=("gateway",),
)
# A take-over may wait a few seconds for the old session's finish in flight (services/runhost/external.py):
# its callers allow this long.
TAKE_TIMEOUT_SECONDS = 15.0
EXTERNAL_TAKE = Subject(
    "dossier.runhost.external.take",
    TakeRequest,
    TakeReply,
    "A new lease for another session of an external run (older ones are fenced off), with what it needs to go on.",
    callers=("gateway",),
)
