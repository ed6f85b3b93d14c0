"""What a token's MCP sessions hold is bounded: binding a run beyond `per_token` ends the token's binding
that would expire first (a renewed run's lives on), and no other token's; on the gateway's own database."""

from __future__ import annotations

import asyncio
from pathlib import Path

from services.gateway.mcp.run_bindings import BINDINGS_PER_TOKEN, McpSession, RunBindings
from services.gateway.tokens import TokenService
from shared.contracts.gateway import IssueTokenRequest
from shared.db import Database
from tests.support.databases import migrated_database

db = migrated_database("gateway", Path(__file__).resolve().parents[3] / "services" / "gateway" / "migrations")


async def issued(db: Database, principal: str) -> str:
    tokens = TokenService(db, admin_token="adm_test")
    return (await tokens.issue(IssueTokenRequest(scope="acme", principal=principal))).token


async def held(db: Database, token: str) -> int:
    async with db.statement() as conn:
        count = await conn.fetchval(
            "SELECT count(*) FROM mcp_run_bindings WHERE token_hash = $1", McpSession.of("s", token).token_hash
        )
    return int(count)


async def test_binding_past_the_bound_ends_the_binding_that_would_expire_first(db: Database) -> None:
    assert BINDINGS_PER_TOKEN >= 100  # far more runs than an agent drives at once
    token, other = await issued(db, "alice"), await issued(db, "bob")
    bindings = RunBindings(db, per_token=3)
    sessions = [McpSession.of(f"session-{n}", token) for n in range(5)]
    theirs = McpSession.of("session-0", other)
    await bindings.bind(theirs, "run_theirs", "rl_theirs")
    for n, session in enumerate(sessions[:3]):
        await bindings.bind(session, f"run_{n}", f"rl_{n}")
    # The first run renews its lease: its binding now lives longest.
    await bindings.renewed(sessions[0], "run_0")
    for n, session in enumerate(sessions[3:], start=3):
        await bindings.bind(session, f"run_{n}", f"rl_{n}")

    held_runs = [await bindings.lease_of(session, None) for session in sessions]
    assert held_runs == [("run_0", "rl_0"), None, None, ("run_3", "rl_3"), ("run_4", "rl_4")]
    assert await held(db, token) == 3
    assert await bindings.lease_of(theirs, None) == ("run_theirs", "rl_theirs")


async def test_bindings_made_at_once_stay_within_the_bound(db: Database) -> None:
    token = await issued(db, "carol")
    bindings = RunBindings(db, per_token=4)
    sessions = [McpSession.of(f"agent-{n}", token) for n in range(12)]
    await asyncio.gather(*(bindings.bind(s, f"run_{n}", f"rl_{n}") for n, s in enumerate(sessions)))
    assert await held(db, token) == 4
