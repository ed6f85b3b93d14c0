"""The workbench's sessions: the cookie holds a random session id, the database maps it to the token.

A stolen cookie is then not an API token (it opens no `/v1` route and no MCP call), and signing out
deletes the session, so a copy of the cookie kept elsewhere opens nothing afterwards. A session lives
as long as `SESSION_SECONDS` and no longer than its token: the token is resolved on every page, so its
expiry and revocation end the session as well. A token holds at most `SESSIONS_PER_TOKEN` sessions: a
sign-in beyond them ends the token's oldest, so signing in again and again cannot fill the database.
"""

from __future__ import annotations

import hashlib
import re
import secrets
import time

from services.gateway.repository import SessionRepository, hold_token
from services.gateway.tokens import TokenService, token_digest
from shared.contracts.common import Actor
from shared.db import Database
from shared.errors import Unauthenticated

SESSION_SECONDS = 12 * 3600
# A person's browsers and devices, with room to spare.
SESSIONS_PER_TOKEN = 20
_SHAPE = re.compile(r"^[A-Za-z0-9_-]{43}$")
_CACHE_LIMIT = 10_000


def _digest(session_id: str) -> str:
    return hashlib.sha256(b"dossier-web-session|" + session_id.encode()).hexdigest()


class SessionService:
    def __init__(
        self,
        db: Database,
        tokens: TokenService,
        *,
        repo: SessionRepository | None = None,
        cache_seconds: float = 2.0,
        lifetime_seconds: float = SESSION_SECONDS,
        per_token: int = SESSIONS_PER_TOKEN,
    ):
        self._db = db
        self._tokens = tokens
        self._repo = repo or SessionRepository()
        # A sign-out in another gateway process is seen here once the cached entry is older than this.
        self._cache_seconds = cache_seconds
        self._lifetime = lifetime_seconds
        self._per_token = per_token
        self._cache: dict[str, tuple[str, float]] = {}

    async def open(self, token: str) -> str:
        """A new session for a token already resolved; returns the id the cookie carries."""
        session_id = secrets.token_urlsafe(32)
        token_hash = token_digest(token)
        async with self._db.transaction() as conn:
            await hold_token(conn, token_hash=token_hash)
            await self._repo.delete_expired_sessions(conn)
            await self._repo.insert_session(
                conn, session_hash=_digest(session_id), token_hash=token_hash, lifetime_seconds=self._lifetime
            )
            ended = await self._repo.end_sessions_past(conn, token_hash=token_hash, keep=self._per_token)
        for digest in ended:
            self._cache.pop(digest, None)
        return session_id

    async def resolve(self, session_id: str) -> tuple[Actor, str] | None:
        """The session's actor and its token's digest, or None: unknown, signed out, expired, or its token
        revoked or expired."""
        if not _SHAPE.match(session_id):
            return None
        digest = _digest(session_id)
        now = time.monotonic()
        cached = self._cache.get(digest)
        if cached is not None and cached[1] > now:
            token_hash = cached[0]
        else:
            async with self._db.statement() as conn:
                row = await self._repo.find_session(conn, session_hash=digest)
            if row is None:
                self._cache.pop(digest, None)
                return None
            token_hash = row["token_hash"]
            if len(self._cache) >= _CACHE_LIMIT:
                self._cache.clear()
            self._cache[digest] = (token_hash, now + self._cache_seconds)
        try:
            return await self._tokens.resolve_digest(token_hash), token_hash
        except Unauthenticated:
            return None

    async def close(self, session_id: str) -> None:
        """Signs out: the session is deleted, so its cookie, wherever it was copied, opens nothing."""
        if not _SHAPE.match(session_id):
            return
        digest = _digest(session_id)
        self._cache.pop(digest, None)
        async with self._db.transaction() as conn:
            await self._repo.delete_session(conn, session_hash=digest)
