"""The consumption ledger of one run: listed, read, included (naming the model request), unavailable.

Every row is written under the lease fence; a stale worker's row is refused and stops that worker. A row is
written once per stage, ref and locator (services/runhost/migrations/0018_ledger_key.sql): concurrent calls
under one lease that record the same row leave one.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import asyncpg

from services.runhost.leases import StaleLease
from services.runhost.repository import WorkerRuns
from shared.contracts.common import Ref
from shared.db import Database

# A ledger row written inside another's transaction: false when the lease is stale.
RowWriter = Callable[[asyncpg.Connection], Awaitable[bool]]


@dataclass(frozen=True)
class Inclusion:
    """Material whose text entered the model input: recorded against the next model request."""

    ref: Ref
    content_hash: str | None
    locator: str | None


class RunLedger:
    def __init__(self, db: Database, repo: WorkerRuns, run_id: str, epoch: int):
        self._db, self._repo = db, repo
        self.run_id, self.epoch = run_id, epoch
        self._listed: set[tuple[str, str | None]] = set()

    async def load(self) -> None:
        """What earlier attempts already listed, so a resumed run does not list it again."""
        async with self._db.statement() as conn:
            rows = await self._repo.list_ledger(conn, run_id=self.run_id)
        self._listed = {(Ref.model_validate(r["ref"]).key(), r["locator"]) for r in rows if r["stage"] == "listed"}

    async def append_in(self, conn: asyncpg.Connection, stage: str, ref: Ref, **fields: str | None) -> bool:
        """One row inside the caller's transaction; false when this worker's lease is stale."""
        return bool(
            await self._repo.append_ledger(
                conn, run_id=self.run_id, epoch=self.epoch, stage=stage, ref=ref.model_dump(), **fields
            )
        )

    def read_row(self, ref: Ref, content_hash: str | None, locator: str | None) -> RowWriter:
        """The `read` row of a source, for the run's files to write in the transaction that indexes its file
        (services/runhost/memory.py `RunFiles.write`): a read is never recorded without its file, nor the
        file without its read."""

        async def record(conn: asyncpg.Connection) -> bool:
            return await self.append_in(conn, "read", ref, content_hash=content_hash, locator=locator)

        return record

    async def _append(self, stage: str, ref: Ref, **fields: str | None) -> None:
        async with self._db.statement() as conn:
            ok = await self.append_in(conn, stage, ref, **fields)
        if not ok:
            raise StaleLease(self.run_id)

    async def listed(self, ref: Ref, locator: str | None = None) -> None:
        await self.listed_all([(ref, locator)])

    async def listed_all(self, items: list[tuple[Ref, str | None]]) -> None:
        """What one listing or search showed, in the order shown, in one statement: a catalog page of fifty
        items is one round trip, not fifty transactions. What the run listed before is not listed again."""
        fresh = {(ref.key(), locator): (ref, locator) for ref, locator in items}
        for key in self._listed & fresh.keys():
            del fresh[key]
        if not fresh:
            return
        async with self._db.statement() as conn:
            held = await self._repo.append_listed(
                conn,
                run_id=self.run_id,
                epoch=self.epoch,
                refs=[ref.model_dump() for ref, _ in fresh.values()],
                locators=[locator for _, locator in fresh.values()],
            )
        if not held:
            raise StaleLease(self.run_id)
        self._listed.update(fresh)

    async def unavailable(self, ref: Ref, *, reason: str, locator: str | None = None) -> None:
        await self._append("unavailable", ref, reason=reason, locator=locator)

    async def included(self, inclusions: list[Inclusion], *, model_request: str) -> None:
        """What entered one model input, in one statement. A material at the same locator twice is one row,
        the first, as a statement per row would have kept it."""
        first: dict[tuple[str, str | None], Inclusion] = {}
        for item in inclusions:
            first.setdefault((item.ref.key(), item.locator), item)
        if not first:
            return
        rows = [(item.ref.model_dump(), item.content_hash, item.locator) for item in first.values()]
        async with self._db.statement() as conn:
            held = await self._repo.append_included(
                conn, run_id=self.run_id, epoch=self.epoch, rows=rows, model_request=model_request
            )
        if not held:
            raise StaleLease(self.run_id)
