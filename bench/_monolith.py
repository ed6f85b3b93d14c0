"""The read a user would build instead of Dossier: one FastAPI app on the stack's own PostgreSQL.

`bench/load.py` runs it under uvicorn with as many workers as the gateway has, beside the gateway, on the
same route. Each request checks the bearer token's digest (as the gateway takes it) against a tokens table (not revoked, not expired)
and reads the exact version in the same query, the way a monolith holding both tables would; no cache.
`prepare` makes its database (`bench_monolith`) on the stack's PostgreSQL and copies the token's digest
and the gateway's answer into it.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
from fastapi import FastAPI, Header
from fastapi.responses import JSONResponse, Response

from services.gateway.tokens import token_digest

DATABASE = "bench_monolith"
# Two workers with 16 connections each serve the bench's 32 connections.
POOL_SIZE = 16
SCHEMA = """
CREATE TABLE api_tokens (
  token_hash text PRIMARY KEY,
  scope text NOT NULL,
  expires_at timestamptz,
  revoked_at timestamptz
);
CREATE TABLE versions (
  scope text NOT NULL,
  publication_id text NOT NULL,
  version integer NOT NULL,
  document jsonb NOT NULL,
  PRIMARY KEY (publication_id, version)
);
"""
READ = """
SELECT v.document::text AS document
FROM api_tokens t
LEFT JOIN versions v ON v.publication_id = $2 AND v.version = $3 AND v.scope = t.scope
WHERE t.token_hash = $1 AND t.revoked_at IS NULL AND (t.expires_at IS NULL OR t.expires_at > now())
"""


async def prepare(admin_dsn: str, dsn: str, *, token: str, scope: str, document: dict[str, Any]) -> None:
    """The monolith's database, made afresh, holding one token and the version the bench reads."""
    admin = await asyncpg.connect(admin_dsn)
    try:
        await admin.execute(f"DROP DATABASE IF EXISTS {DATABASE}")
        await admin.execute(f"CREATE DATABASE {DATABASE}")
    finally:
        await admin.close()
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(SCHEMA)
        await conn.execute(
            "INSERT INTO api_tokens (token_hash, scope) VALUES ($1, $2)",
            token_digest(token),
            scope,
        )
        await conn.execute(
            "INSERT INTO versions (scope, publication_id, version, document) VALUES ($1, $2, $3, $4::jsonb)",
            scope,
            document["id"],
            document["version"],
            json.dumps(document),
        )
    finally:
        await conn.close()


pool: asyncpg.Pool | None = None


@asynccontextmanager
async def lifespan(_: FastAPI) -> AsyncIterator[None]:
    global pool
    pool = await asyncpg.create_pool(os.environ["BENCH_MONOLITH_DSN"], min_size=POOL_SIZE, max_size=POOL_SIZE)
    try:
        yield
    finally:
        await pool.close()


app = FastAPI(lifespan=lifespan)


@app.get("/v1/publications/{pub_id}/versions/{version}")
async def read(pub_id: str, version: int, authorization: str = Header("")) -> Response:
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or not token:
        return JSONResponse({"error": {"code": "unauthenticated"}}, status_code=401)
    assert pool is not None
    row = await pool.fetchrow(READ, token_digest(token), pub_id, version)
    if row is None:
        return JSONResponse({"error": {"code": "unauthenticated"}}, status_code=401)
    if row["document"] is None:
        return JSONResponse({"error": {"code": "not_found"}}, status_code=404)
    return Response(row["document"], media_type="application/json")
