"""Run grants: short-lived Ed25519-signed capabilities that runhost mints and owner services verify.

A grant is `<base64url(claims json)>.<base64url(signature)>`. It carries the run, the scope, its workspace,
the refs the run was admitted with (`kind:id@version`) and an expiry. It is checked on every read made for a run.
Only runhost holds the private key; publication and assets verify with its public key, so neither can
mint one (shared/proof.py hands the keys out).
"""

from __future__ import annotations

import binascii
import json
import time
from functools import lru_cache

import nacl.exceptions
from nacl.signing import SigningKey, VerifyKey
from pydantic import Field, ValidationError

from shared.contracts.common import Model, Ref
from shared.errors import NotFound, Unauthenticated
from shared.proof import b64, unb64

GRANT_TAG = b"dossier-grant\n"


class GrantClaims(Model):
    run_id: str = Field(min_length=1)
    scope: str = Field(min_length=1)
    refs: list[str] = Field(default_factory=list)
    expires_at: float
    # The run's workspace: its search reaches the publications committed there (services/publication/search.py).
    workspace_id: str | None = None

    def allows(self, ref: Ref) -> bool:
        return ref.key() in self.refs


def sign_grant(key: SigningKey, claims: GrantClaims) -> str:
    payload = json.dumps(claims.model_dump(), separators=(",", ":"), sort_keys=True).encode()
    return f"{b64(payload)}.{b64(key.sign(GRANT_TAG + payload).signature)}"


@lru_cache(maxsize=1024)
def _verified(key_bytes: bytes, token: str) -> GrantClaims:
    """A run presents one grant for all its reads: its signature is checked once, its expiry every time."""
    try:
        payload_text, signature_text = token.split(".", 1)
        payload, signature = unb64(payload_text), unb64(signature_text)
    except (ValueError, TypeError, binascii.Error) as exc:
        raise Unauthenticated("the run grant is malformed") from exc
    try:
        VerifyKey(key_bytes).verify(GRANT_TAG + payload, signature)
    except (nacl.exceptions.BadSignatureError, ValueError, TypeError) as exc:
        raise Unauthenticated("the run grant's signature does not verify") from exc
    try:
        return GrantClaims.model_validate_json(payload)
    except ValidationError as exc:
        raise Unauthenticated("the run grant's claims are malformed") from exc


def verify_grant(key: VerifyKey | None, token: str, *, scope: str, now: float | None = None) -> GrantClaims:
    """Signature, expiry and scope. A grant of another scope is `not_found`, so nothing leaks."""
    if key is None:
        raise Unauthenticated("this service has no key to verify run grants with")
    claims = _verified(key.encode(), token)
    if (now if now is not None else time.time()) >= claims.expires_at:
        raise Unauthenticated("the run grant has expired", {"run_id": claims.run_id})
    if claims.scope != scope:
        raise NotFound("not found")
    return claims


def require_ref(claims: GrantClaims, ref: Ref) -> None:
    """A run may read only what it was admitted with; anything else does not exist for it."""
    if not claims.allows(ref):
        raise NotFound(f"{ref.kind} {ref.id}@{ref.version} is not in this run's grant", {"ref": ref.key()})
