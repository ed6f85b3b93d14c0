"""A signer and a verifier for unit tests of the envelope, trusting the gateway on the test subjects."""

from __future__ import annotations

from nacl.signing import SigningKey

from shared.proof import ProofSigner, ProofVerifier

_KEY = SigningKey.generate()
SIGNER = ProofSigner("gateway", _KEY)
VERIFIER = ProofVerifier(
    {"gateway": _KEY.verify_key}, trusted={s: frozenset({"gateway"}) for s in ("t.echo", "t.any", "s")}
)
