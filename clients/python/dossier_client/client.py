"""`Dossier`: the API over blocking HTTP, typed on the API's contracts."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import httpx

from dossier_client import _routes as r
from dossier_client import models as m
from dossier_client._transport import DEFAULT_TIMEOUT, http_options, send, settings
from dossier_client.session import RunSession

T = TypeVar("T")


class Dossier:
    """The API of one Dossier gateway with one bearer token (by default `DOSSIER_URL`, `DOSSIER_TOKEN`).

    Errors are raised as `dossier_client.errors` (`NotFound`, `Conflict`, `Invalid`, ...); a 429 is sent
    again after its `Retry-After`. Use it as a context manager, or `close()` it."""

    def __init__(self, url: str | None = None, token: str | None = None, *, timeout: float = DEFAULT_TIMEOUT):
        self.url, self._token = settings(url, token)
        self._timeout = timeout
        self.http = httpx.Client(**self.http_options())

    def http_options(self) -> dict[str, Any]:
        """What a second HTTP client of the same gateway and token is made with (a run's lease renewer)."""
        return http_options(self.url, self._token, self._timeout)

    def __enter__(self) -> Dossier:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.http.close()

    def do(self, call: r.Call[T]) -> T:
        return call.parse(send(self.http, call.request))

    def _pages(self, page: Callable[[str | None], r.Call[tuple[list[T], str | None]]]) -> Iterator[T]:
        cursor: str | None = None
        while True:
            items, cursor = self.do(page(cursor))
            yield from items
            if cursor is None:
                return

    # -- workspaces, publications, sources -------------------------------------------------------------

    def health(self) -> dict[str, Any]:
        return self.do(r.health())

    def create_workspace(self, title: str, goal: str) -> m.Workspace:
        return self.do(r.create_workspace(title, goal))

    def workspace(self, workspace_id: str) -> m.Workspace:
        return self.do(r.workspace(workspace_id))

    def workspaces(self) -> Iterator[m.Workspace]:
        """Every workspace of the token's scope, newest first, page after page."""
        return self._pages(r.workspaces)

    def catalog(self, workspace_id: str, limit: int | None = None) -> m.Catalog:
        return self.do(r.catalog(workspace_id, limit))

    def publish(self, title: str, body: str, workspace_id: str | None = None) -> m.PublicationVersion:
        return self.do(r.publish(title, body, workspace_id))

    def publication_version(self, pub_id: str, version: int) -> m.PublicationVersion:
        return self.do(r.publication_version(pub_id, version))

    def upload(
        self,
        file: str | Path | bytes,
        source_id: str,
        workspace_id: str | None = None,
        *,
        filename: str | None = None,
    ) -> m.AssetVersion:
        return self.do(r.upload(file, source_id, workspace_id, filename))

    def search_evidence(self, q: str, *, source_id: str | None = None, limit: int | None = None) -> list[m.EvidenceHit]:
        return self.do(r.search_evidence(q, source_id, limit))

    def evidence(self, evidence_id: str) -> m.Evidence:
        return self.do(r.evidence(evidence_id))

    # -- runs ------------------------------------------------------------------------------------------

    def start_run(
        self,
        workspace_id: str,
        question: str,
        *,
        history: Sequence[r.HistoryItem] | None = None,
        request_id: str | None = None,
        model: str | None = None,
        limits: dict[str, Any] | None = None,
        conversation_id: str | None = None,
    ) -> m.Run:
        """A run the run host drives (its policy, `model`). For a run you drive, `external_run`."""
        fields = {"history": history, "request_id": request_id, "model": model, "limits": limits}
        return self.do(r.start_run(workspace_id, question, conversation_id=conversation_id, **fields))

    def run(self, run_id: str) -> m.Run:
        return self.do(r.run(run_id))

    def wait_run(self, run_id: str, *, timeout: float = 600, interval: float = 0.5) -> m.Run:
        """The run once it is completed, failed or cancelled; TimeoutError after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            run = self.run(run_id)
            if run.final:
                return run
            if time.monotonic() > deadline:
                raise TimeoutError(f"run {run_id} is still {run.status} after {timeout} s")
            time.sleep(interval)

    def cancel_run(self, run_id: str) -> m.Run:
        return self.do(r.cancel_run(run_id))

    def ledger(self, run_id: str) -> Iterator[m.LedgerRow]:
        """Every row of the run's ledger in order: what it listed, read, included, found unavailable."""
        return self._pages(lambda cursor: r.ledger(run_id, cursor))

    def run_files(self, run_id: str) -> Iterator[m.FileEntry]:
        return self._pages(lambda cursor: r.run_files(run_id, cursor))

    def run_file(self, run_id: str, path: str) -> str:
        return self.do(r.run_file(run_id, path))

    def prov(self, run_id: str) -> dict[str, Any]:
        """The run's lineage as W3C PROV-JSON."""
        return self.do(r.prov(run_id))

    # -- runs you drive yourself -----------------------------------------------------------------------

    def external_run(
        self,
        workspace_id: str,
        question: str,
        history: Sequence[r.HistoryItem] | None = None,
        lease_seconds: int = 300,
        request_id: str | None = None,
        agent: dict[str, Any] | None = None,
    ) -> RunSession:
        """Admit a run that you drive (`driver: external`) and hold its lease: a `RunSession`, renewed in
        the background until you finish it or leave its `with` block (the run then stays running)."""
        fields = {"history": history, "request_id": request_id, "agent": agent}
        run = self.do(r.start_run(workspace_id, question, driver="external", lease_seconds=lease_seconds, **fields))
        if run.lease is None:
            # The same request id admitted it before (a retry): its answer shows no lease, so this caller,
            # who made it, takes it over.
            return self.take_over(run.id, force=True, admitted=run)
        return RunSession(self, run.id, run.lease, admitted=run)

    def take_over(self, run_id: str, force: bool = False, *, admitted: m.Run | None = None) -> RunSession:
        """Go on with an external run in this session: a new lease epoch (older tokens are refused from
        now on), and `.resume`, what the run holds already (plan, files, reads)."""
        taken = self.do(r.take(run_id, force))
        return RunSession(self, run_id, taken.lease, admitted=admitted, resume=taken.resume)
