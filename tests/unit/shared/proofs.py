"""A signer and a verifier for unit tests of the envelope, trusting the gateway on the test subjects."""

from __future__ import annotations

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from shared.proof import ProofSigner, ProofVerifier

_KEY = Ed25519PrivateKey.generate()
SIGNER = ProofSigner("gateway", _KEY)
VERIFIER = ProofVerifier(
    {"gateway": _KEY.public_key()}, trusted={s: frozenset({"gateway"}) for s in ("t.echo", "t.any", "s")}
)
