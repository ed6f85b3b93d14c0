"""API tokens: issue, list and revoke (admin only), and resolve a bearer token to its actor."""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import time
from dataclasses import dataclass
from datetime import UTC, datetime

import asyncpg

from services.gateway.repository import TokenRepository
from shared.contracts.common import Actor, PageRequest
from shared.contracts.gateway import IssuedToken, IssueTokenRequest, TokenInfo, TokenPage
from shared.db import Database
from shared.errors import Invalid, NotFound, Unauthenticated

_TOKEN_SHAPE = re.compile(r"^dsk_[A-Za-z0-9_-]{20,200}$")
_ID_SHAPE = re.compile(r"^tok_[0-9a-f]{1,64}$")
_CACHE_LIMIT = 10_000
# A revocation in another gateway process is seen here once the cached row is older than this.
DEFAULT_CACHE_SECONDS = 2.0


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True)
class _Resolved:
    actor: Actor
    token_id: str
    expires_at: datetime | None
    fresh_until: float


def _info(row: asyncpg.Record) -> TokenInfo:
    return TokenInfo(
        id=row["id"],
        scope=row["scope"],
        principal=row["principal"],
        expires_at=row["expires_at"],
        created_at=row["created_at"],
    )


class TokenService:
    def __init__(
        self,
        db: Database,
        *,
        admin_token: str,
        repo: TokenRepository | None = None,
        cache_seconds: float = DEFAULT_CACHE_SECONDS,
    ):
        if not admin_token:
            raise ValueError("DOSSIER_ADMIN_TOKEN must be set")
        self._db = db
        self._admin = admin_token
        self._repo = repo or TokenRepository()
        # Short-lived: other gateway processes revoke tokens too, and only the database tells us so.
        self._cache_seconds = cache_seconds
        self._cache: dict[str, _Resolved] = {}

    async def issue(self, request: IssueTokenRequest) -> IssuedToken:
        token = f"dsk_{secrets.token_urlsafe(32)}"
        async with self._db.transaction() as conn:
            row = await self._repo.insert_token(
                conn,
                token_id=f"tok_{secrets.token_hex(12)}",
                token_hash=token_digest(token),
                scope=request.scope,
                principal=request.principal,
                expires_in=request.expires_in,
            )
        return IssuedToken(token=token, **_info(row).model_dump(exclude={"created_at"}))

    async def list_page(self, *, scope: str | None, limit: int, cursor: str | None) -> TokenPage:
        async with self._db.statement() as conn:
            rows, next_cursor = await self._repo.list_tokens(
                conn, scope=scope, page=PageRequest(limit=limit, cursor=cursor)
            )
        return TokenPage(items=[_info(row) for row in rows], next_cursor=next_cursor)

    async def revoke(self, token_id: str) -> None:
        if not _ID_SHAPE.match(token_id):
            # No stored id has another shape; text a database cannot hold is bad input, not a miss.
            if "\x00" in token_id:
                raise Invalid("token_id: a NUL character is not allowed", {"field": "token_id"})
            raise NotFound("token not found")
        async with self._db.transaction() as conn:
            if not await self._repo.revoke_token(conn, token_id=token_id):
                raise NotFound("token not found")
        # This process forgets it at once; the others within their cache period.
        for digest in [d for d, r in self._cache.items() if r.token_id == token_id]:
            self._cache.pop(digest, None)

    def is_admin(self, token: str) -> bool:
        return hmac.compare_digest(token.encode(), self._admin.encode())

    async def resolve(self, token: str) -> Actor:
        if not _TOKEN_SHAPE.match(token):
            raise Unauthenticated("the bearer token is malformed")
        return await self.resolve_digest(token_digest(token))

    async def resolve_digest(self, digest: str) -> Actor:
        """The actor of the token whose sha256 is `digest` (a workbench session keeps only that)."""
        now = time.monotonic()
        resolved = self._cache.get(digest)
        if resolved is None or resolved.fresh_until <= now:
            resolved = await self._lookup(digest, fresh_until=now + self._cache_seconds)
        # Checked on every request, cached or not: expiry needs no other process to tell us.
        if resolved.expires_at is not None and resolved.expires_at <= datetime.now(UTC):
            raise Unauthenticated("the bearer token has expired")
        return resolved.actor

    async def _lookup(self, digest: str, *, fresh_until: float) -> _Resolved:
        async with self._db.statement() as conn:
            row = await self._repo.find_token(conn, token_hash=digest)
        if row is None:
            self._cache.pop(digest, None)
            raise Unauthenticated("the bearer token is not known")
        if row["revoked_at"] is not None:
            self._cache.pop(digest, None)
            raise Unauthenticated("the bearer token was revoked")
        resolved = _Resolved(
            actor=Actor(scope=row["scope"], principal=row["principal"]),
            token_id=row["id"],
            expires_at=row["expires_at"],
            fresh_until=fresh_until,
        )
        if len(self._cache) >= _CACHE_LIMIT:
            self._cache.clear()
        self._cache[digest] = resolved
        return resolved


def bearer(header: str | None) -> str:
    if not header:
        raise Unauthenticated("an Authorization: Bearer token is required")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthenticated("the Authorization header must be 'Bearer <token>'")
    return token.strip()
