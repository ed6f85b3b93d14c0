"""`AsyncDossier`: the API over async HTTP, the same calls as `Dossier`."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Generator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import httpx

from dossier_client import _routes as r
from dossier_client import models as m
from dossier_client._transport import DEFAULT_TIMEOUT, http_options, send_async, settings
from dossier_client.aio_session import AsyncRunSession

T = TypeVar("T")


class AsyncDossier:
    """`Dossier` for asyncio: every method is a coroutine, lists are async iterators."""

    def __init__(self, url: str | None = None, token: str | None = None, *, timeout: float = DEFAULT_TIMEOUT):
        self.url, token = settings(url, token)
        self.http = httpx.AsyncClient(**http_options(self.url, token, timeout))

    async def __aenter__(self) -> AsyncDossier:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self.http.aclose()

    async def do(self, call: r.Call[T]) -> T:
        return call.parse(await send_async(self.http, call.request))

    async def _pages(self, page: Callable[[str | None], r.Call[tuple[list[T], str | None]]]) -> AsyncIterator[T]:
        cursor: str | None = None
        while True:
            items, cursor = await self.do(page(cursor))
            for item in items:
                yield item
            if cursor is None:
                return

    async def health(self) -> dict[str, Any]:
        return await self.do(r.health())

    async def create_workspace(self, title: str, goal: str) -> m.Workspace:
        return await self.do(r.create_workspace(title, goal))

    async def workspace(self, workspace_id: str) -> m.Workspace:
        return await self.do(r.workspace(workspace_id))

    def workspaces(self) -> AsyncIterator[m.Workspace]:
        return self._pages(r.workspaces)

    async def catalog(self, workspace_id: str, limit: int | None = None) -> m.Catalog:
        return await self.do(r.catalog(workspace_id, limit))

    async def publish(self, title: str, body: str, workspace_id: str | None = None) -> m.PublicationVersion:
        return await self.do(r.publish(title, body, workspace_id))

    async def publication_version(self, pub_id: str, version: int) -> m.PublicationVersion:
        return await self.do(r.publication_version(pub_id, version))

    async def upload(
        self,
        file: str | Path | bytes,
        source_id: str,
        workspace_id: str | None = None,
        *,
        filename: str | None = None,
    ) -> m.AssetVersion:
        return await self.do(r.upload(file, source_id, workspace_id, filename))

    async def search_evidence(
        self, q: str, *, source_id: str | None = None, limit: int | None = None
    ) -> list[m.EvidenceHit]:
        return await self.do(r.search_evidence(q, source_id, limit))

    async def evidence(self, evidence_id: str) -> m.Evidence:
        return await self.do(r.evidence(evidence_id))

    async def start_run(
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
        fields = {"history": history, "request_id": request_id, "model": model, "limits": limits}
        return await self.do(r.start_run(workspace_id, question, conversation_id=conversation_id, **fields))

    async def run(self, run_id: str) -> m.Run:
        return await self.do(r.run(run_id))

    async def wait_run(self, run_id: str, *, timeout: float = 600, interval: float = 0.5) -> m.Run:
        deadline = time.monotonic() + timeout
        while True:
            run = await self.run(run_id)
            if run.final:
                return run
            if time.monotonic() > deadline:
                raise TimeoutError(f"run {run_id} is still {run.status} after {timeout} s")
            await asyncio.sleep(interval)

    async def cancel_run(self, run_id: str) -> m.Run:
        return await self.do(r.cancel_run(run_id))

    def ledger(self, run_id: str) -> AsyncIterator[m.LedgerRow]:
        return self._pages(lambda cursor: r.ledger(run_id, cursor))

    def run_files(self, run_id: str) -> AsyncIterator[m.FileEntry]:
        return self._pages(lambda cursor: r.run_files(run_id, cursor))

    async def run_file(self, run_id: str, path: str) -> str:
        return await self.do(r.run_file(run_id, path))

    async def prov(self, run_id: str) -> dict[str, Any]:
        return await self.do(r.prov(run_id))

    def external_run(
        self,
        workspace_id: str,
        question: str,
        history: Sequence[r.HistoryItem] | None = None,
        lease_seconds: int = 300,
        request_id: str | None = None,
        agent: dict[str, Any] | None = None,
    ) -> Opening:
        """Admit a run you drive: `async with dossier.external_run(...) as run:` (or `await` it)."""
        fields = {"history": history, "request_id": request_id, "agent": agent}

        async def admit() -> AsyncRunSession:
            call = r.start_run(workspace_id, question, driver="external", lease_seconds=lease_seconds, **fields)
            run = await self.do(call)
            if run.lease is None:  # a repeat of its own admission: take the run over (see Dossier)
                return await self._take(run.id, True, admitted=run)
            return AsyncRunSession(self, run.id, run.lease, admitted=run)

        return Opening(admit)

    def take_over(self, run_id: str, force: bool = False) -> Opening:
        """Go on with an external run in this session (`async with` or `await`); see `Dossier.take_over`."""
        return Opening(lambda: self._take(run_id, force))

    async def _take(self, run_id: str, force: bool, *, admitted: m.Run | None = None) -> AsyncRunSession:
        taken = await self.do(r.take(run_id, force))
        return AsyncRunSession(self, run_id, taken.lease, admitted=admitted, resume=taken.resume)


class Opening:
    """A run session on its way: awaited, the session; as `async with`, the session closed at the end."""

    def __init__(self, open_session: Callable[[], Any]):
        self._open = open_session
        self._session: AsyncRunSession | None = None

    def __await__(self) -> Generator[Any, None, AsyncRunSession]:
        return self._open().__await__()  # type: ignore[no-any-return]

    async def __aenter__(self) -> AsyncRunSession:
        self._session = await self._open()
        return self._session

    async def __aexit__(self, *exc: object) -> None:
        if self._session is not None:
            await self._session.aclose()
