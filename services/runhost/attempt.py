"""One attempt at a run: the parts that the holder of a run's lease works with, made in one place.

Whoever holds a run's lease, a worker (services/runhost/worker.py) or an outside agent's session
(services/runhost/external.py), works on it through a `RunAttempt`: the run, the lease epoch that fences
every write, its working files, its ledger, its grant for reads at the owners, the toolbox, the finisher and,
for a model endpoint's run, the model-call journal. `RunAttempts` is the one factory of them, and of a run's
files read or written outside any attempt (a person's plan edit and file reads).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Sequence
from dataclasses import dataclass

from nacl.signing import SigningKey

from services.runhost.admitted import AdmittedRun
from services.runhost.catalog import RunCatalog
from services.runhost.finishing import Finisher
from services.runhost.journal import ModelJournal
from services.runhost.ledger import RunLedger
from services.runhost.memory import ContentCache, RunFiles
from services.runhost.owners import Owners
from services.runhost.repository import WorkerRuns
from services.runhost.tools import POLICY_READING, ToolBox, agent_reading
from shared.blobs import Blobs
from shared.db import Database
from shared.grants import GrantClaims, sign_grant
from shared.proof import load_private_key
from shared.settings import RunhostSettings


def run_grant(run: AdmittedRun, settings: RunhostSettings, extra: Sequence[str] = ()) -> str:
    """The run's grant: its scope and the refs it was admitted with (its first catalog page and its history),
    for its reads at the owners; `extra`, refs of later catalog pages the run reads (services/runhost/catalog.py)."""
    claims = GrantClaims(
        run_id=run.id,
        scope=run.scope,
        refs=sorted({*run.grant_refs(), *extra}),
        expires_at=time.time() + settings.run_grant_seconds,
        workspace_id=run.workspace_id,
    )
    return sign_grant(grant_key(settings.proof_key), claims)


@functools.lru_cache(maxsize=4)
def grant_key(proof_key: str) -> SigningKey:
    """Runhost is the one process that mints run grants: the key is its own proof key."""
    return load_private_key(proof_key)


@dataclass(frozen=True)
class RunAttempt:
    """A run under one lease epoch, with everything that works on it. `finisher.run` follows the run as its
    finish keeps an answer; `run` stays the run as the attempt began."""

    run: AdmittedRun
    epoch: int
    grant: str
    files: RunFiles
    ledger: RunLedger
    toolbox: ToolBox
    finisher: Finisher
    # Only a model endpoint costs a call (and answers differently twice); local policies re-decide.
    journal: ModelJournal | None


class RunAttempts:
    def __init__(self, *, db: Database, repo: WorkerRuns, blobs: Blobs, owners: Owners, settings: RunhostSettings):
        self.db, self.repo, self.blobs, self.owners, self.settings = db, repo, blobs, owners, settings
        self.contents = ContentCache()

    def files(self, run_id: str, epoch: int | None = None) -> RunFiles:
        """A run's working files; writes fenced by `epoch`, or by none (a person's edit of the plan)."""
        return RunFiles(self.blobs, self.db, self.repo, run_id, epoch, self.contents)

    def attempt(self, run: AdmittedRun) -> RunAttempt:
        """The attempt of the run's current lease epoch. An outside agent's toolbox tells it to read through
        the run's own routes; the run host's policies read with their tools."""
        epoch = run.lease_epoch
        files = self.files(run.id, epoch)
        ledger = RunLedger(self.db, self.repo, run.id, epoch)
        grant = run_grant(run, self.settings)
        toolbox = ToolBox(
            actor=run.actor,
            grant=grant,
            catalog=run.catalog,
            files=files,
            ledger=ledger,
            owners=self.owners,
            reading=agent_reading(run.id) if run.driver == "external" else POLICY_READING,
            pages=RunCatalog(run, self.owners, mint=lambda refs: run_grant(run, self.settings, refs)),
        )
        finisher = Finisher(
            db=self.db,
            repo=self.repo,
            owners=self.owners,
            blobs=self.blobs,
            run=run,
            epoch=epoch,
            files=files,
            ledger=ledger,
        )
        journal = ModelJournal(self.db, run.id, epoch) if run.model == "openai" else None
        return RunAttempt(run, epoch, grant, files, ledger, toolbox, finisher, journal)
