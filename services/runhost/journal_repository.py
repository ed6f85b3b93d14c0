"""The SQL of the model-call journal. Every write is fenced by the lease epoch, like every worker write."""

from __future__ import annotations

from typing import Any

import asyncpg

from services.runhost.repository import FENCE


class JournalRepository:
    async def insert_request(
        self,
        conn: asyncpg.Connection,
        *,
        run_id: str,
        epoch: int,
        request_id: str,
        input_hash: str,
        response: dict[str, Any],
    ) -> int | None:
        seq = await conn.fetchval(
            "INSERT INTO model_journal (run_id, epoch, request_id, input_hash, response)"
            f" SELECT $1, $2, $3, $4, $5 WHERE {FENCE} RETURNING seq",
            run_id,
            epoch,
            request_id,
            input_hash,
            response,
        )
        return int(seq) if seq is not None else None

    async def set_result(
        self, conn: asyncpg.Connection, *, run_id: str, epoch: int, seq: int, result: dict[str, Any]
    ) -> bool:
        done = await conn.fetchval(
            f"UPDATE model_journal SET result = $4 WHERE run_id = $1 AND seq = $3 AND {FENCE} RETURNING 1",
            run_id,
            epoch,
            seq,
            result,
        )
        return done is not None

    async def find_earlier(
        self, conn: asyncpg.Connection, *, run_id: str, epoch: int, input_hash: str
    ) -> asyncpg.Record | None:
        """The latest answer to this exact input journaled by an earlier attempt of the run."""
        return await conn.fetchrow(
            "SELECT seq, request_id, response FROM model_journal"
            " WHERE run_id = $1 AND input_hash = $3 AND epoch < $2 ORDER BY seq DESC LIMIT 1",
            run_id,
            epoch,
            input_hash,
        )

    async def last_entry(self, conn: asyncpg.Connection, *, run_id: str) -> asyncpg.Record | None:
        return await conn.fetchrow(
            "SELECT seq, epoch, request_id, input_hash, response, result FROM model_journal"
            " WHERE run_id = $1 ORDER BY seq DESC LIMIT 1",
            run_id,
        )

    async def results(self, conn: asyncpg.Connection, *, run_id: str) -> list[asyncpg.Record]:
        rows: list[asyncpg.Record] = await conn.fetch(
            "SELECT result FROM model_journal WHERE run_id = $1 AND result IS NOT NULL ORDER BY seq", run_id
        )
        return rows

    async def append_replayed(
        self, conn: asyncpg.Connection, *, run_id: str, epoch: int, request_id: str, input_hash: str
    ) -> bool:
        done = await conn.fetchval(
            "INSERT INTO ledger (run_id, epoch, stage, ref, content_hash, model_request)"
            f" SELECT $1, $2, 'replayed', NULL, $3, $4 WHERE {FENCE} RETURNING 1",
            run_id,
            epoch,
            input_hash,
            request_id,
        )
        return done is not None
