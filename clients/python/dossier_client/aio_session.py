"""`AsyncRunSession`: `RunSession` for asyncio, its lease renewed by a background task."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from dossier_client import _routes as r
from dossier_client import models as m
from dossier_client._lease import LeaseKeeper, limit_error
from dossier_client.errors import Conflict, DossierError, LeaseExpired, LeaseLost
from dossier_client.session import Target

if TYPE_CHECKING:
    from dossier_client.aio import AsyncDossier

T = TypeVar("T")


class AsyncRunSession:
    """A run you drive, as `RunSession`, with coroutines; made by `AsyncDossier.external_run` or
    `take_over` inside a running event loop, which runs its renewals."""

    def __init__(
        self,
        dossier: AsyncDossier,
        run_id: str,
        lease: m.Lease,
        *,
        admitted: m.Run | None = None,
        resume: m.Resume | None = None,
    ):
        self.dossier, self.run_id = dossier, run_id
        self.admitted, self.resume = admitted, resume
        self._keeper = LeaseKeeper(lease)
        self._retaking = asyncio.Lock()
        self._renewer: asyncio.Task[None] | None = asyncio.get_running_loop().create_task(
            self._renew_loop(), name=f"dossier-lease-{run_id}"
        )

    @property
    def lease(self) -> m.Lease:
        return self._keeper.lease

    async def __aenter__(self) -> AsyncRunSession:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Stop renewing the lease (the run stays as it is)."""
        task, self._renewer = self._renewer, None
        if task is not None and task is not asyncio.current_task():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def catalog(self) -> m.Catalog:
        return await self._bound(lambda token: r.run_catalog(self.run_id, token))

    async def search(self, q: str, limit: int = 10) -> list[m.Hit]:
        return await self._bound(lambda token: r.run_search(self.run_id, token, q, limit))

    async def read(self, target: Target, locator: str | None = None) -> m.Passage:
        body = m.ref_to_read(target) | ({"locator": locator} if locator else {})
        return await self._bound(lambda token: r.run_read(self.run_id, token, body))

    async def write(self, path: str, text: str) -> None:
        await self._bound(lambda token: r.run_write(self.run_id, token, path, text))

    async def renew(self) -> m.Lease:
        lease = await self._bound(lambda token: r.renew(self.run_id, token))
        self._keeper.renewed(lease)
        return lease

    async def finish(
        self,
        answer: str,
        checkpoint: m.CheckpointUpdate | dict[str, Any] | None = None,
        *,
        title: str | None = None,
    ) -> m.Run:
        done = await self._bound(lambda token: r.finish(self.run_id, token, answer, title, checkpoint))
        await self.aclose()
        return done

    async def file(self, path: str) -> str:
        return await self.dossier.run_file(self.run_id, path)

    async def run(self) -> m.Run:
        return await self.dossier.run(self.run_id)

    def langchain_tools(self) -> list[Any]:
        from dossier_client.tools import langchain_tools

        return langchain_tools(self)

    def openai_agents_tools(self) -> list[Any]:
        from dossier_client.tools import openai_agents_tools

        return openai_agents_tools(self)

    async def _bound(self, make: Callable[[str], r.Call[T]], *, retaken: bool = False) -> T:
        self._keeper.check()
        token = self.lease.token
        try:
            return await self.dossier.do(make(token))
        except LeaseExpired as exc:
            if retaken:
                raise self._keeper.lose(exc) from None
            await self._retake(token)
            return await self._bound(make, retaken=True)
        except LeaseLost as exc:
            raise self._keeper.lose(exc) from None
        except Conflict as exc:
            raise await self._why(exc) from None

    async def _why(self, conflict: Conflict) -> DossierError:
        try:
            return limit_error(await self.run(), conflict)
        except DossierError:
            return conflict

    async def _retake(self, expired: str) -> None:
        async with self._retaking:
            if self.lease.token != expired:
                return
            try:
                self._keeper.renewed((await self.dossier.do(r.take(self.run_id, False))).lease)
            except DossierError as exc:
                raise self._keeper.lose(exc) from None

    async def _renew_loop(self) -> None:
        while True:
            await asyncio.sleep(self._keeper.next_wait())
            token = self.lease.token
            try:
                self._keeper.renewed(await self.dossier.do(r.renew(self.run_id, token)))
            except LeaseExpired:
                try:
                    await self._retake(token)
                except LeaseLost:
                    return
            except DossierError as exc:
                if not self._keeper.renewal_failed(exc):
                    return
