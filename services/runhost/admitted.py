"""One run as the run host holds it: a row of `runs`, typed, with its frozen admission parsed.

The repository returns every `SELECT *` of `runs` as an `AdmittedRun` (`AdmittedRun.of(record)`). The
JSON columns are what admission and finishing store (`catalog`, `history`, `limits`,
`checkpoint_proposal`), read back into the contract models they were dumped from, so a run stored by an
earlier version of the run host loads and resumes as it was.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Literal

import asyncpg
from pydantic import ConfigDict, Field

from shared.contracts import runhost as c
from shared.contracts.common import Actor, Model, PublicationRef, Ref
from shared.contracts.workspace import Catalog


class Limits(Model):
    """The limits a run was admitted with: what it asked for, capped by the server's maxima."""

    max_steps: int
    max_chars: int
    max_seconds: float
    # None in a run admitted before model requests had a limit of their own: its steps bound them.
    max_model_requests: int | None = None

    def exceeded(self, *, steps: int, chars: int, past_deadline: bool) -> str | None:
        """Which limit a run's counters after a call would break, by its admission name (`max_steps`,
        `max_chars`, `max_seconds`), if any."""
        if past_deadline:
            return "max_seconds"
        if steps > self.max_steps:
            return "max_steps"
        if chars > self.max_chars:
            return "max_chars"
        return None

    def maximum(self, which: str) -> int | float:
        return {"max_steps": self.max_steps, "max_chars": self.max_chars, "max_seconds": self.max_seconds}[which]


class Proposal(Model):
    """A checkpoint proposal as the workspace takes it; a run keeps the model's own (`final_proposal`)
    unchecked, and checks it against this only when it finishes: an invalid one never fails the run."""

    summary: str = Field(min_length=1, max_length=20_000)
    add_questions: list[str] = Field(default_factory=list, max_length=50)
    resolve_questions: list[str] = Field(default_factory=list, max_length=50)
    expected_revision: int = Field(default=0, ge=0)


class AdmittedRun(Model):
    """Every column of `runs`. A column a later migration adds is ignored until the model names it."""

    model_config = ConfigDict(extra="ignore")

    id: str
    scope: str
    workspace_id: str
    conversation_id: str
    request_id: str
    params_hash: str
    status: c.RunStatus
    question: str
    model: str
    goal_version: int
    goal_text: str
    catalog: Catalog
    # The mark the workspace reads the later pages of the catalog as of (None: admitted before they paged).
    catalog_as_of: int | None = None
    history: list[c.HistoryRef]
    limits: Limits
    publication_id: str | None
    publication_version: int | None
    checkpoint_proposal: c.CheckpointProposalResult
    workspace_association: Literal["confirmed", "refused", "pending"]
    error: str | None
    error_details: dict[str, Any] | None = None
    cancel_requested: bool
    lease_owner: str | None
    lease_epoch: int
    lease_expires_at: datetime | None
    steps: int
    chars_read: int
    model_requests: int
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    model_input_chars_max: int
    model_input_chars_total: int
    source_chars_read: int
    tokens_in: int | None
    tokens_out: int | None
    final_answer: str | None
    # The model's proposal as it sent it (see `Proposal`).
    final_proposal: dict[str, Any] | None
    principal: str | None
    claims_supported: int
    claims_weak: int
    claims_unsupported: int
    driver: c.Driver
    lease_seconds: int | None
    final_title: str | None
    # The admitting request's trace context (shared/tracing.py), when tracing was on.
    trace_headers: dict[str, str] | None
    # An external run's outside agent, as its admission named it.
    agent: c.RunAgent | None = None
    report_artifact_id: str | None = None
    # When its working files and journal were let go (retention), if they were.
    files_released_at: datetime | None = None

    @classmethod
    def of(cls, record: asyncpg.Record) -> AdmittedRun:
        return cls.model_validate(dict(record))

    @property
    def deadline(self) -> datetime | None:
        """When the run's time limit runs out, counted from its first start."""
        if self.started_at is None:
            return None
        return self.started_at + timedelta(seconds=self.limits.max_seconds)

    @property
    def actor(self) -> Actor:
        """Who the run's own calls are made as: the run, in its scope."""
        return Actor(scope=self.scope, principal=f"run:{self.id}")

    def grant_refs(self) -> list[str]:
        """The refs the run was admitted with (its catalog and its history), for its grant."""
        refs = [Ref(kind=i.kind, id=i.id, version=i.version).key() for i in self.catalog.items]
        refs += [Ref(kind="publication", id=h.publication_id, version=h.version).key() for h in self.history]
        return sorted(set(refs))

    @property
    def answer_title(self) -> str:
        """The title of the run's publication: the outside agent's, or the question's (as a person would)."""
        return self.final_title or c.short_title(self.question)

    @property
    def publication(self) -> PublicationRef | None:
        """The answer's publication, once the run published it."""
        if self.publication_id is None or self.publication_version is None:
            return None
        return PublicationRef(id=self.publication_id, version=self.publication_version)

    def to_contract(self) -> c.Run:
        """The run as its API shows it."""
        return c.Run(
            id=self.id,
            workspace_id=self.workspace_id,
            conversation_id=self.conversation_id,
            request_id=self.request_id,
            status=self.status,
            question=self.question,
            model=self.model,
            goal_version=self.goal_version,
            history=self.history,
            catalog=self.catalog,
            publication=self.publication,
            checkpoint_proposal=self.checkpoint_proposal,
            workspace_association=self.workspace_association,
            error=self.error,
            error_details=self.error_details,
            created_at=self.created_at,
            finished_at=self.finished_at,
            driver=self.driver,
            agent=self.agent,
            lease_state=(
                c.LeaseState(epoch=self.lease_epoch, expires_at=self.lease_expires_at, holder=self.lease_owner)
                if self.driver == "external"
                else None
            ),
            report_artifact_id=self.report_artifact_id,
            stats=c.RunStats(
                steps=self.steps,
                model_requests=self.model_requests,
                model_input_chars_max=self.model_input_chars_max,
                model_input_chars_total=self.model_input_chars_total,
                source_chars_read=self.source_chars_read,
                tokens_in=self.tokens_in,
                tokens_out=self.tokens_out,
                claims_supported=self.claims_supported,
                claims_weak=self.claims_weak,
                claims_unsupported=self.claims_unsupported,
            ),
        )
