"""API tokens: issue (admin only), resolve a bearer token to its actor."""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets

from services.gateway.repository import TokenRepository
from shared.contracts.common import Actor
from shared.db import Database
from shared.errors import Unauthenticated

_TOKEN_SHAPE = re.compile(r"^dsk_[A-Za-z0-9_-]{20,200}$")
_CACHE_LIMIT = 10_000


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class TokenService:
    def __init__(self, db: Database, *, admin_token: str, repo: TokenRepository | None = None):
        if not admin_token:
            raise ValueError("DOSSIER_ADMIN_TOKEN must be set")
        self._db = db
        self._admin = admin_token
        self._repo = repo or TokenRepository()
        # Tokens cannot be revoked through the API, so a resolved token may be cached for the process's life.
        self._cache: dict[str, Actor] = {}

    async def issue(self, actor: Actor) -> str:
        token = f"dsk_{secrets.token_urlsafe(32)}"
        async with self._db.transaction() as conn:
            await self._repo.insert_token(conn, token_hash=_hash(token), scope=actor.scope, principal=actor.principal)
        return token

    def is_admin(self, token: str) -> bool:
        return hmac.compare_digest(token.encode(), self._admin.encode())

    async def resolve(self, token: str) -> Actor:
        if not _TOKEN_SHAPE.match(token):
            raise Unauthenticated("the bearer token is malformed")
        digest = _hash(token)
        cached = self._cache.get(digest)
        if cached is not None:
            return cached
        async with self._db.pool.acquire() as conn:
            row = await self._repo.find_token(conn, token_hash=digest)
        if row is None:
            raise Unauthenticated("the bearer token is not known")
        actor = Actor(scope=row["scope"], principal=row["principal"])
        if len(self._cache) >= _CACHE_LIMIT:
            self._cache.clear()
        self._cache[digest] = actor
        return actor


def bearer(header: str | None) -> str:
    if not header:
        raise Unauthenticated("an Authorization: Bearer token is required")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthenticated("the Authorization header must be 'Bearer <token>'")
    return token.strip()
