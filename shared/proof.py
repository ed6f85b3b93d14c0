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

A proof is `<base64url(claims json)>.<base64url(signature)>.<base64url(digests)>`. One signature covers the
claims of every request a process sends in one turn of its event loop (at most `MAX_BATCH`): `digests` is
the SHA-256 of each of those claims' bytes, one after another, and the signature is over a domain tag and
`digests`, so a grant and a proof can never stand for each other. The owner checks that its request's
claims are among the digests and that the signature holds over them; a signature it has verified once is
remembered (a pure function of the key, the digests and the signature), so the other requests of the same
turn cost a lookup, not an Ed25519 verification. Each request still has claims of its own (actor, subject,
request id, payload digest, single-use id, expiry), checked one by one as before.
"""

from __future__ import annotations

import asyncio
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

PROOF_TAG = b"dossier-proof-batch\n"
# Requests one signature may cover: a proof carries all their digests (32 bytes each).
MAX_BATCH = 16
DIGEST_BYTES = 32
# Signatures a verifier remembers having verified, the oldest forgotten first (forgetting costs only time).
VERIFIED_SIGNATURES = 1024
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
    """Signs the actor of each call this process makes: `prove` one request at a time, `prove_batched` all
    the requests of one turn of the event loop under one signature."""

    def __init__(self, issuer: str, private_key: SigningKey, *, seconds: float = PROOF_SECONDS):
        self.issuer = issuer
        self._key = private_key
        self._seconds = seconds
        self._pending: list[tuple[bytes, asyncio.Future[str]]] = []

    def _claims(
        self,
        subject: str,
        actor: Actor,
        request_id: str,
        data: Mapping[str, Any],
        grant: str | None,
        expires_at: float | None,
    ) -> bytes:
        return orjson.dumps(
            {
                "iss": self.issuer,
                "scope": actor.scope,
                "principal": actor.principal,
                "sub": subject,
                "rid": request_id,
                "dig": request_digest(data, grant),
                "jti": b64(os.urandom(16)),
                "exp": expires_at if expires_at is not None else time.time() + self._seconds,
            }
        )

    def _sign(self, batch: list[bytes]) -> list[str]:
        digests = b"".join(hashlib.sha256(claims).digest() for claims in batch)
        tail = f".{b64(self._key.sign(PROOF_TAG + digests).signature)}.{b64(digests)}"
        return [b64(claims) + tail for claims in batch]

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
        return self._sign([self._claims(subject, actor, request_id, data, grant, expires_at)])[0]

    async def prove_batched(
        self, subject: str, actor: Actor, request_id: str, *, data: Mapping[str, Any], grant: str | None = None
    ) -> str:
        """The same proof as `prove`, signed together with the other requests that ask for one before the
        event loop's next turn (a gateway worker under load asks for several per turn)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[str] = loop.create_future()
        self._pending.append((self._claims(subject, actor, request_id, data, grant, None), future))
        if len(self._pending) == 1:
            loop.call_soon(self._sign_pending)
        elif len(self._pending) >= MAX_BATCH:
            self._sign_pending()
        return await future

    def _sign_pending(self) -> None:
        batch, self._pending = self._pending, []
        if not batch:
            return
        try:
            proofs = self._sign([claims for claims, _ in batch])
        except Exception as exc:
            for _, future in batch:
                if not future.done():
                    future.set_exception(exc)
            return
        for (_, future), proof in zip(batch, proofs, strict=True):
            if not future.done():
                future.set_result(proof)


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
        self._verified: dict[tuple[str, bytes, bytes], None] = {}

    def _verify(self, issuer: str, digests: bytes, signature: bytes, subject: str) -> None:
        """The issuer's signature over these digests, verified once: the next request of the same batch finds
        it remembered (only signatures that verified are)."""
        key = (issuer, signature, digests)
        if key in self._verified:
            return
        try:
            self._keys[issuer].verify(PROOF_TAG + digests, signature)
        except (nacl.exceptions.BadSignatureError, ValueError, TypeError) as exc:
            raise Forbidden("the proof's signature does not verify", {"subject": subject}) from exc
        if len(self._verified) >= VERIFIED_SIGNATURES:
            del self._verified[next(iter(self._verified))]
        self._verified[key] = None

    def check(self, request: BusRequest, subject: str) -> str:
        """The signer that vouched for this request's actor on this subject; `forbidden` if none did."""
        if not request.proof:
            raise Forbidden("the request carries no proof of its caller", {"subject": subject})
        try:
            payload_text, signature_text, digests_text = request.proof.split(".")
            payload, signature, digests = unb64(payload_text), unb64(signature_text), unb64(digests_text)
            if not digests or len(digests) % DIGEST_BYTES or len(digests) > MAX_BATCH * DIGEST_BYTES:
                raise ValueError("the digests of a proof come in 32 bytes each, one to MAX_BATCH of them")
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
        own = hashlib.sha256(payload).digest()
        if own not in (digests[i : i + DIGEST_BYTES] for i in range(0, len(digests), DIGEST_BYTES)):
            raise Forbidden("the proof's signature does not cover its claims", {"subject": subject})
        self._verify(issuer, digests, signature, subject)
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
