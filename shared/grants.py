"""Run grants: short-lived HMAC-signed capabilities that runhost issues and owner services verify.

A grant is `<base64url(claims json)>.<base64url(hmac-sha256)>`. It carries the run, the scope, the refs
the run was admitted with (`kind:id@version`) and an expiry. It is checked on every read made for a run.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time

from pydantic import Field, ValidationError

from shared.contracts.common import Model, Ref
from shared.errors import NotFound, Unauthenticated


class GrantClaims(Model):
    run_id: str = Field(min_length=1)
    scope: str = Field(min_length=1)
    refs: list[str] = Field(default_factory=list)
    expires_at: float

    def allows(self, ref: Ref) -> bool:
        return ref.key() in self.refs


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _mac(secret: str, payload: bytes) -> bytes:
    return hmac.new(secret.encode(), payload, hashlib.sha256).digest()


def sign_grant(secret: str, claims: GrantClaims) -> str:
    if not secret:
        raise ValueError("the bus secret is empty; grants cannot be signed")
    payload = json.dumps(claims.model_dump(), separators=(",", ":"), sort_keys=True).encode()
    return f"{_b64(payload)}.{_b64(_mac(secret, payload))}"


def verify_grant(secret: str, token: str, *, scope: str, now: float | None = None) -> GrantClaims:
    """Signature, expiry and scope. A grant of another scope is `not_found`, so nothing leaks."""
    try:
        payload_text, mac_text = token.split(".", 1)
        payload, mac = _unb64(payload_text), _unb64(mac_text)
    except (ValueError, TypeError) as exc:
        raise Unauthenticated("the run grant is malformed") from exc
    if not secret or not hmac.compare_digest(mac, _mac(secret, payload)):
        raise Unauthenticated("the run grant's signature does not verify")
    try:
        claims = GrantClaims.model_validate_json(payload)
    except ValidationError as exc:
        raise Unauthenticated("the run grant's claims are malformed") from exc
    if (now if now is not None else time.time()) >= claims.expires_at:
        raise Unauthenticated("the run grant has expired", {"run_id": claims.run_id})
    if claims.scope != scope:
        raise NotFound("not found")
    return claims


def require_ref(claims: GrantClaims, ref: Ref) -> None:
    """A run may read only what it was admitted with; anything else does not exist for it."""
    if not claims.allows(ref):
        raise NotFound(f"{ref.kind} {ref.id}@{ref.version} is not in this run's grant", {"ref": ref.key()})
