"""The runs an MCP session holds: `begin_run` and `take_over_run` bind the run and its lease to the session,
so that the run tools take only their own arguments and the lease never enters the model's context.

The gateway is stateless and runs several worker processes, so a binding lives in its database, where any
worker reads it. The MCP session id (`Mcp-Session-Id`, assigned on the `initialize` answer) is never
stored. A binding is found by a hash of the session id and the bearer token's hash together, and its lease
is sealed (XSalsa20-Poly1305) with a key made from the session id and the bearer token itself, which the
database does not hold either. So the session id alone opens nothing, another token that learns the id
finds no binding, and the table alone (a backup, a replica) reveals no lease. See docs/security.md.
A token holds at most `BINDINGS_PER_TOKEN` bindings over all its sessions: binding one more ends the one that
would expire first.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass

import nacl.exceptions
import nacl.secret

from services.gateway.repository import RunBindingRepository, hold_token
from services.gateway.tokens import token_digest
from shared.db import Database

SESSION_HEADER = "mcp-session-id"
# Long enough for any lease: a run must renew at least hourly, and renewing extends its binding.
BINDING_SECONDS = 24 * 3600
# Bindings one token holds at once, over all its sessions: far more runs than one agent drives at a time, and
# a bound on what naming new sessions (a client may name its own) and taking a run over in each can leave.
BINDINGS_PER_TOKEN = 1000
# Visible ASCII (the MCP spec's rule for a session id), and long enough not to be guessed.
_SESSION_SHAPE = re.compile(r"^[\x21-\x7e]{16,200}$")


def new_session_id() -> str:
    return "mcs_" + secrets.token_urlsafe(32)


def session_id_of(header: str | None) -> str | None:
    """The session id a request carries, if it has the shape of one."""
    return header if header is not None and _SESSION_SHAPE.match(header) else None


@dataclass(frozen=True)
class McpSession:
    """One MCP session of one bearer token, as far as its bindings go (the id itself is not kept)."""

    lookup: str
    token_hash: str
    key: bytes

    @classmethod
    def of(cls, session_id: str, token: str) -> McpSession:
        token_hash = token_digest(token)
        lookup = hashlib.sha256(f"dossier-mcp-session\0{token_hash}\0{session_id}".encode()).hexdigest()
        key = hmac.new(token.encode(), f"dossier-mcp-lease\0{session_id}".encode(), hashlib.sha256).digest()
        return cls(lookup=lookup, token_hash=token_hash, key=key)


class RunBindings:
    def __init__(
        self,
        db: Database,
        *,
        repo: RunBindingRepository | None = None,
        lifetime: float = BINDING_SECONDS,
        per_token: int = BINDINGS_PER_TOKEN,
    ):
        self._db = db
        self._repo = repo or RunBindingRepository()
        self._lifetime = lifetime
        self._per_token = per_token

    async def bind(self, session: McpSession, run_id: str, lease: str) -> None:
        sealed = bytes(nacl.secret.SecretBox(session.key).encrypt(lease.encode()))
        async with self._db.transaction() as conn:
            await hold_token(conn, token_hash=session.token_hash)
            await self._repo.delete_expired(conn)
            await self._repo.bind(
                conn,
                session_hash=session.lookup,
                run_id=run_id,
                token_hash=session.token_hash,
                sealed_lease=sealed,
                lifetime_seconds=self._lifetime,
            )
            await self._repo.end_bindings_past(conn, token_hash=session.token_hash, keep=self._per_token)

    async def lease_of(self, session: McpSession, run_id: str | None) -> tuple[str, str] | None:
        """The run (`run_id`, or the one the session bound last) and its lease, if the session holds it."""
        async with self._db.statement() as conn:
            row = await self._repo.find(conn, session_hash=session.lookup, token_hash=session.token_hash, run_id=run_id)
        if row is None:
            return None
        try:
            lease = nacl.secret.SecretBox(session.key).decrypt(bytes(row["sealed_lease"])).decode()
        except nacl.exceptions.CryptoError:
            return None
        return row["run_id"], lease

    async def renewed(self, session: McpSession, run_id: str) -> None:
        """The lease was renewed: the binding lives on as long again."""
        async with self._db.transaction() as conn:
            await self._repo.extend(conn, session_hash=session.lookup, run_id=run_id, lifetime_seconds=self._lifetime)

    async def forget(self, session: McpSession) -> None:
        """The client ended its session: it holds no run any more (the runs go on, to be taken over)."""
        async with self._db.transaction() as conn:
            await self._repo.forget_session(conn, session_hash=session.lookup, token_hash=session.token_hash)
