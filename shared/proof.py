"""Proof of caller: who vouches for the whole request an envelope carries, checked by the owner before any rule.

A NATS permission says who may *send* on a subject, not for whom. So every envelope carries `proof`: the
calling process signs (Ed25519) the actor it acts for, the subject, the request id, a digest of the
request's grant and payload, a single-use id and a short expiry. The gateway signs the actor it
authenticated; runhost and workspace sign the actors of their own calls (a run's, an event's). An owner
holds only the public keys, and trusts a signer on a subject only if that signer calls that subject
(`natsauth.CALLS`, the same table the NATS permissions come from). The reads of a run also need the run's
grant (shared/grants.py), so runhost reads only what a run was admitted with.

The digest is taken over the payload as the owner's rules will see it (the decoded JSON, keys sorted), so
a copied proof cannot carry another payload, and a duplicated JSON key means the same to the digest as to
the rule. Each verifier remembers the single-use ids it has taken until their proofs expire, so the same
envelope is acted on once.

A proof is `<base64url(claims json)>.<base64url(signature)>`; the signature covers a domain tag and the
claims' bytes, so a grant and a proof can never stand for each other.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import heapq
import json
import os
import time
from collections.abc import Mapping
from typing import Any

import nacl.exceptions
import orjson
from nacl.signing import SigningKey, VerifyKey

from shared.contracts import assets, publication
from shared.contracts.common import Actor, BusRequest
from shared.errors import Forbidden
from shared.natsauth import CALLS
from shared.settings import CommonSettings

PROOF_TAG = b"dossier-proof\n"
# Long enough for a request that waits for a handler slot, short enough that a copied envelope soon dies.
PROOF_SECONDS = 60.0
# How far a signer's clock may run ahead of an owner's: a proof that expires later than this window plus
# the skew is refused, so the ids a verifier must remember are bounded by one window of requests.
CLOCK_SKEW_SECONDS = 5.0
# The processes that sign: those that call another service.
SIGNERS: tuple[str, ...] = tuple(sorted(name for name, calls in CALLS.items() if calls))
# A run's attachments are commands of a run only: no tool sends them yet (runhost's NATS permissions leave
# them out), and whoever does must be runhost, with the run's grant.
RUN_COMMANDS: tuple[str, ...] = (assets.ATTACH, assets.PROMOTE)
# Who may vouch on which subject: a signer on the subjects it calls, and no other.
TRUSTED: dict[str, frozenset[str]] = {subject: frozenset({"runhost"}) for subject in RUN_COMMANDS}
for _signer in SIGNERS:
    for _subject in CALLS[_signer]:
        TRUSTED[_subject] = TRUSTED.get(_subject, frozenset()) | {_signer}
# What runhost sends for a run: besides its own signature, the run's grant bounds what it reaches.
GRANT_BOUND: dict[str, frozenset[str]] = {
    "runhost": frozenset({publication.READ, assets.SEARCH, assets.READ, *RUN_COMMANDS})
}


def b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def new_private_key() -> str:
    """A new signing key as the stack keeps it: the 32-byte seed, base64url."""
    return b64(SigningKey.generate().encode())


def load_private_key(text: str) -> SigningKey:
    try:
        return SigningKey(unb64(text.strip()))
    except (ValueError, TypeError, binascii.Error) as exc:
        raise ValueError("a proof key must be a base64url Ed25519 seed of 32 bytes") from exc


def public_key_text(private_text: str) -> str:
    return b64(load_private_key(private_text).verify_key.encode())


def load_public_key(text: str) -> VerifyKey:
    try:
        return VerifyKey(unb64(text.strip()))
    except (ValueError, TypeError, binascii.Error) as exc:
        raise ValueError("a public proof key must be a base64url Ed25519 key of 32 bytes") from exc


def public_keys_text(keys: Mapping[str, str]) -> str:
    """`DOSSIER_PROOF_PUBLIC_KEYS`: `signer=<public key>` pairs, comma separated."""
    return ",".join(f"{name}={key}" for name, key in sorted(keys.items()))


def parse_public_keys(text: str) -> dict[str, VerifyKey]:
    keys: dict[str, VerifyKey] = {}
    for pair in filter(None, (p.strip() for p in text.split(","))):
        name, sep, key = pair.partition("=")
        if not sep or name not in SIGNERS:
            raise ValueError(
                f"DOSSIER_PROOF_PUBLIC_KEYS: {pair.split('=')[0]!r} is not a signer ({', '.join(SIGNERS)})"
            )
        keys[name] = load_public_key(key)
    return keys


def request_digest(data: Mapping[str, Any], grant: str | None) -> str:
    """What a proof binds besides the actor: the grant and the payload, as JSON with sorted keys.

    The owner digests the payload it decoded, the one its rules are given; the caller digests the payload
    it sends, which decodes to the same values. orjson takes every JSON value but integers beyond 64 bits
    and text with a lone surrogate; for those both ends fall back to the standard library's encoder (a lone
    surrogate never reaches an owner's digest: the envelope is refused as unstorable first).
    """
    value = {"grant": grant, "data": data}
    try:
        text = orjson.dumps(value, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)
    except TypeError:
        text = json.dumps(value, sort_keys=True, separators=(",", ":")).encode()
    return b64(hashlib.sha256(text).digest())


class ProofSigner:
    """Signs the actor of each call this process makes."""

    def __init__(self, issuer: str, private_key: SigningKey, *, seconds: float = PROOF_SECONDS):
        self.issuer = issuer
        self._key = private_key
        self._seconds = seconds

    def prove(
        self,
        subject: str,
        actor: Actor,
        request_id: str,
        *,
        data: Mapping[str, Any],
        grant: str | None = None,
        expires_at: float | None = None,
    ) -> str:
        """A proof for one request: this actor, subject, request id, grant and payload, usable once."""
        claims = {
            "iss": self.issuer,
            "scope": actor.scope,
            "principal": actor.principal,
            "sub": subject,
            "rid": request_id,
            "dig": request_digest(data, grant),
            "jti": b64(os.urandom(16)),
            "exp": expires_at if expires_at is not None else time.time() + self._seconds,
        }
        payload = orjson.dumps(claims)
        return f"{b64(payload)}.{b64(self._key.sign(PROOF_TAG + payload).signature)}"


class SeenProofs:
    """The single-use ids of the proofs taken, each kept until its proof expires (then it could not be used
    again anyway). Proofs live at most one window, so this holds at most one window of requests."""

    def __init__(self) -> None:
        self._taken: set[str] = set()
        # (expiry, id), soonest first: signers' clocks differ a little, so ids do not arrive in expiry order.
        self._expiries: list[tuple[float, str]] = []

    def take(self, proof_id: str, expires_at: float, now: float) -> bool:
        """True the first time `proof_id` is taken, False on any later use before it expires."""
        while self._expiries and self._expiries[0][0] <= now:
            self._taken.discard(heapq.heappop(self._expiries)[1])
        if proof_id in self._taken:
            return False
        self._taken.add(proof_id)
        heapq.heappush(self._expiries, (expires_at, proof_id))
        return True

    def __len__(self) -> int:
        return len(self._taken)


class ProofVerifier:
    """Checks an envelope's proof against the public keys of the signers; it holds no key that can sign."""

    def __init__(self, public_keys: Mapping[str, VerifyKey], *, trusted: Mapping[str, frozenset[str]] = TRUSTED):
        self._keys = dict(public_keys)
        self._trusted = trusted
        self._seen = SeenProofs()

    def check(self, request: BusRequest, subject: str) -> str:
        """The signer that vouched for this request's actor on this subject; `forbidden` if none did."""
        if not request.proof:
            raise Forbidden("the request carries no proof of its caller", {"subject": subject})
        try:
            payload_text, signature_text = request.proof.split(".", 1)
            payload, signature = unb64(payload_text), unb64(signature_text)
            claims = orjson.loads(payload)
            issuer, expires_at = str(claims["iss"]), float(claims["exp"])
            vouched = (claims["scope"], claims["principal"], claims["sub"], claims["rid"])
            digest, proof_id = str(claims["dig"]), f"{issuer}:{claims['jti']}"
        except (ValueError, TypeError, KeyError, binascii.Error, orjson.JSONDecodeError) as exc:
            raise Forbidden("the proof of caller is malformed", {"subject": subject}) from exc
        if issuer not in self._trusted.get(subject, ()) or issuer not in self._keys:
            raise Forbidden(f"{issuer!r} may not vouch for a caller of this subject", {"subject": subject})
        if vouched != (request.actor.scope, request.actor.principal, subject, request.request_id):
            raise Forbidden("the proof was made for another actor, subject or request", {"subject": subject})
        now = time.time()
        if now >= expires_at:
            raise Forbidden("the proof of caller has expired", {"subject": subject})
        if expires_at > now + PROOF_SECONDS + CLOCK_SKEW_SECONDS:
            raise Forbidden("the proof of caller lives longer than a proof may", {"subject": subject})
        try:
            self._keys[issuer].verify(PROOF_TAG + payload, signature)
        except (nacl.exceptions.BadSignatureError, ValueError, TypeError) as exc:
            raise Forbidden("the proof's signature does not verify", {"subject": subject}) from exc
        if digest != request_digest(request.data, request.grant):
            raise Forbidden("the proof was made for another payload or grant", {"subject": subject})
        if subject in GRANT_BOUND.get(issuer, ()) and not request.grant:
            raise Forbidden("runhost calls this only for a run, with the run's grant", {"subject": subject})
        # Last, so that only a request that passed every other check uses up its proof.
        if not self._seen.take(proof_id, expires_at, now):
            raise Forbidden("the proof of caller was already used", {"subject": subject})
        return issuer


def signer_for(process: str, settings: CommonSettings) -> ProofSigner | None:
    """The process's signer; a signing process without its key cannot act for anyone, so it does not start."""
    if process not in SIGNERS:
        return None
    if not settings.proof_key:
        raise ValueError(f"DOSSIER_PROOF_KEY is not set: {process} signs the actor of every call it makes")
    return ProofSigner(process, load_private_key(settings.proof_key))


def verifier_for(settings: CommonSettings) -> ProofVerifier:
    """No public keys, no trusted signer: such a service refuses every request (never trusts an actor)."""
    return ProofVerifier(parse_public_keys(settings.proof_public_keys))


def grant_key(settings: CommonSettings) -> VerifyKey | None:
    """The key run grants verify with: runhost's, the one service that mints them."""
    return parse_public_keys(settings.proof_public_keys).get("runhost")
