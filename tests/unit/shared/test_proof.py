"""The proof of caller: what the verifier takes and what it refuses (shared/proof.py)."""

from __future__ import annotations

import asyncio
import hashlib
import time
from typing import Any

import pytest
from nacl.signing import SigningKey

from shared.contracts import assets, publication, workspace
from shared.contracts.common import Actor, BusRequest
from shared.errors import Forbidden
from shared.natsauth import CALLS
from shared.proof import (
    DIGEST_BYTES,
    GRANT_BOUND,
    MAX_BATCH,
    RUN_COMMANDS,
    SIGNERS,
    TRUSTED,
    VERIFIED_SIGNATURES,
    ProofSigner,
    ProofVerifier,
    SeenProofs,
    b64,
    load_private_key,
    new_private_key,
    parse_public_keys,
    public_key_text,
    public_keys_text,
    request_digest,
    signer_for,
    unb64,
    verifier_for,
)
from shared.settings import CommonSettings

KEYS = {name: SigningKey.generate() for name in SIGNERS}
VERIFIER = ProofVerifier({name: key.verify_key for name, key in KEYS.items()})
ALICE = Actor(scope="acme", principal="alice")


def envelope(
    proof: str | None,
    *,
    actor: Actor = ALICE,
    request_id: str = "req-1",
    grant: str | None = None,
    data: dict[str, Any] | None = None,
) -> BusRequest:
    return BusRequest(actor=actor, proof=proof, grant=grant, request_id=request_id, data=data or {})


def prove(
    signer: str,
    subject: str,
    *,
    actor: Actor = ALICE,
    key: SigningKey | None = None,
    data: dict[str, Any] | None = None,
    grant: str | None = None,
    expires_at: float | None = None,
) -> str:
    signing = ProofSigner(signer, key or KEYS[signer])
    return signing.prove(subject, actor, "req-1", data=data or {}, grant=grant, expires_at=expires_at)


def test_the_signers_are_the_processes_that_call_others() -> None:
    assert SIGNERS == ("gateway", "runhost", "workspace")
    for subject, signers in TRUSTED.items():
        assert all(subject in CALLS[s] or subject in RUN_COMMANDS for s in signers)


def test_a_proof_by_a_signer_trusted_on_the_subject_is_taken() -> None:
    assert VERIFIER.check(envelope(prove("gateway", workspace.GET)), workspace.GET) == "gateway"
    assert VERIFIER.check(envelope(prove("workspace", publication.CHECK)), publication.CHECK) == "workspace"
    read = envelope(prove("runhost", publication.READ, grant="g"), grant="g")
    assert VERIFIER.check(read, publication.READ) == "runhost"


@pytest.mark.parametrize(
    ("what", "request_", "subject"),
    [
        ("no proof", envelope(None), workspace.GET),
        ("malformed", envelope("not-a-proof"), workspace.GET),
        ("not base64 json", envelope("a.b"), workspace.GET),
        ("expired", envelope(prove("gateway", workspace.GET, expires_at=time.time() - 1)), workspace.GET),
        ("another subject", envelope(prove("gateway", workspace.LIST)), workspace.GET),
        (
            "another scope",
            envelope(prove("gateway", workspace.GET, actor=Actor(scope="evil", principal="alice"))),
            workspace.GET,
        ),
        (
            "another principal",
            envelope(prove("gateway", workspace.GET, actor=Actor(scope="acme", principal="bob"))),
            workspace.GET,
        ),
        ("another request", envelope(prove("gateway", workspace.GET), request_id="req-2"), workspace.GET),
        (
            "an untrusted key",
            envelope(prove("gateway", workspace.GET, key=SigningKey.generate())),
            workspace.GET,
        ),
        ("a signer not trusted there", envelope(prove("workspace", workspace.DELETE)), workspace.DELETE),
        ("runhost on a user's write", envelope(prove("runhost", workspace.DELETE)), workspace.DELETE),
        ("a run's read without its grant", envelope(prove("runhost", assets.READ)), assets.READ),
        ("an unknown signer", envelope(prove("assets", assets.READ, key=KEYS["gateway"])), assets.READ),
        (
            "another payload",
            envelope(prove("gateway", workspace.GET, data={"workspace_id": "ws_mine"}), data={"workspace_id": "ws_x"}),
            workspace.GET,
        ),
        ("a payload added", envelope(prove("gateway", workspace.GET), data={"workspace_id": "ws_x"}), workspace.GET),
        (
            "another grant",
            envelope(prove("runhost", publication.READ, grant="g-mine"), grant="g-other"),
            publication.READ,
        ),
        (
            "a grant dropped for a user's read",
            envelope(prove("gateway", publication.GET, grant="g")),
            publication.GET,
        ),
        (
            "a proof that lives longer than one window",
            envelope(prove("gateway", workspace.GET, expires_at=time.time() + 3600)),
            workspace.GET,
        ),
    ],
)
def test_anything_else_is_forbidden(what: str, request_: BusRequest, subject: str) -> None:
    with pytest.raises(Forbidden):
        VERIFIER.check(request_, subject)


def test_a_verifier_without_keys_trusts_no_one() -> None:
    with pytest.raises(Forbidden):
        ProofVerifier({}).check(envelope(prove("gateway", workspace.GET)), workspace.GET)


def test_keys_travel_as_text_and_verifiers_get_only_public_ones() -> None:
    private = {name: new_private_key() for name in SIGNERS}
    public = public_keys_text({name: public_key_text(key) for name, key in private.items()})
    verifier_settings = CommonSettings(proof_public_keys=public)
    assert signer_for("publication", verifier_settings) is None
    verifier = verifier_for(verifier_settings)
    signer = signer_for("gateway", CommonSettings(proof_key=private["gateway"], proof_public_keys=public))
    assert signer is not None
    proof = signer.prove(workspace.GET, ALICE, "req-1", data={})
    assert verifier.check(envelope(proof), workspace.GET) == "gateway"
    # A public key is no signing key.
    for text in public.split(","):
        assert load_private_key(text.partition("=")[2]).verify_key != parse_public_keys(text)[text.partition("=")[0]]


def test_a_signer_without_its_key_does_not_start() -> None:
    with pytest.raises(ValueError, match="DOSSIER_PROOF_KEY"):
        signer_for("runhost", CommonSettings())


def test_public_keys_name_only_signers() -> None:
    with pytest.raises(ValueError):
        parse_public_keys(f"assets={public_key_text(new_private_key())}")


def test_runhost_reads_of_a_run_are_grant_bound() -> None:
    assert GRANT_BOUND["runhost"] == {publication.READ, assets.SEARCH, assets.READ, assets.ATTACH, assets.PROMOTE}
    assert TRUSTED[assets.ATTACH] == TRUSTED[assets.PROMOTE] == {"runhost"}


def test_a_proof_is_taken_once() -> None:
    verifier = ProofVerifier({name: key.verify_key for name, key in KEYS.items()})
    request = envelope(prove("gateway", workspace.GET, data={"workspace_id": "ws_1"}), data={"workspace_id": "ws_1"})
    assert verifier.check(request, workspace.GET) == "gateway"
    with pytest.raises(Forbidden, match="already used"):
        verifier.check(request, workspace.GET)
    # A refused request does not use its proof up: only a request that passed every other check does.
    fresh = prove("gateway", workspace.GET, data={"workspace_id": "ws_2"})
    with pytest.raises(Forbidden, match="another payload"):
        verifier.check(envelope(fresh, data={"workspace_id": "ws_3"}), workspace.GET)
    assert verifier.check(envelope(fresh, data={"workspace_id": "ws_2"}), workspace.GET) == "gateway"


def test_the_digest_reads_the_payload_as_the_rule_does() -> None:
    """Key order and spacing change nothing; a value does. An integer past 64 bits is digested too."""
    assert request_digest({"a": 1, "b": [1, 2]}, None) == request_digest({"b": [1, 2], "a": 1}, None)
    assert request_digest({"a": 1}, None) != request_digest({"a": 2}, None)
    assert request_digest({"a": 1}, None) != request_digest({"a": 1}, "g")
    assert request_digest({"n": 2**70}, None) != request_digest({"n": 2**70 + 1}, None)
    # Text no UTF-8 can carry is digested too (the sender's envelope is then refused naming the field).
    assert request_digest({"t": "half \ud800"}, None) != request_digest({"t": "half"}, None)


def test_seen_proofs_are_forgotten_once_expired() -> None:
    seen = SeenProofs()
    assert seen.take("a", 10.0, 0.0) and seen.take("b", 12.0, 0.0) and seen.take("c", 11.0, 0.0)
    assert not seen.take("a", 10.0, 5.0)
    # At 11.5 a and c have expired (a proof past its expiry is refused before this is asked); b is kept.
    assert seen.take("d", 20.0, 11.5) and len(seen) == 2
    assert not seen.take("b", 12.0, 11.5)


class CountingKey:
    """A verify key that counts the Ed25519 verifications it does."""

    def __init__(self, key: SigningKey) -> None:
        self._key = key.verify_key
        self.verified = 0

    def verify(self, message: bytes, signature: bytes) -> bytes:
        self.verified += 1
        return self._key.verify(message, signature)


def parts(proof: str) -> tuple[bytes, bytes, bytes]:
    claims, signature, digests = proof.split(".")
    return unb64(claims), unb64(signature), unb64(digests)


async def batch(signer: ProofSigner, n: int, subject: str = workspace.GET) -> list[str]:
    """`n` proofs asked for in one turn of the event loop, each for its own request id and payload."""
    return list(
        await asyncio.gather(
            *(signer.prove_batched(subject, ALICE, f"req-{i}", data={"workspace_id": f"ws_{i}"}) for i in range(n))
        )
    )


def batch_request(proof: str, i: int) -> BusRequest:
    return envelope(proof, request_id=f"req-{i}", data={"workspace_id": f"ws_{i}"})


async def test_one_turns_proofs_share_one_signature_and_the_owner_verifies_it_once() -> None:
    key = CountingKey(KEYS["gateway"])
    verifier = ProofVerifier({"gateway": key})  # type: ignore[dict-item]
    proofs = await batch(ProofSigner("gateway", KEYS["gateway"]), 5)
    assert len({parts(p)[1] for p in proofs}) == 1 and len({parts(p)[0] for p in proofs}) == 5
    assert all(len(parts(p)[2]) == 5 * DIGEST_BYTES for p in proofs)
    for i, proof in enumerate(proofs):
        assert verifier.check(batch_request(proof, i), workspace.GET) == "gateway"
    assert key.verified == 1
    # Each request of the batch is still its own: used once, for its own payload and id only.
    with pytest.raises(Forbidden, match="already used"):
        verifier.check(batch_request(proofs[0], 0), workspace.GET)
    more = await batch(ProofSigner("gateway", KEYS["gateway"]), 2)
    with pytest.raises(Forbidden, match="another actor, subject or request"):
        verifier.check(batch_request(more[0], 1), workspace.GET)
    with pytest.raises(Forbidden, match="another payload"):
        verifier.check(envelope(more[0], request_id="req-0", data={"workspace_id": "ws_1"}), workspace.GET)


async def test_a_batch_is_at_most_max_batch_requests_and_each_signer_signs_its_own() -> None:
    proofs = await batch(ProofSigner("gateway", KEYS["gateway"]), MAX_BATCH * 2 + 3)
    assert len({parts(p)[1] for p in proofs}) == 3
    assert max(len(parts(p)[2]) for p in proofs) == MAX_BATCH * DIGEST_BYTES
    for i, proof in enumerate(proofs):
        assert VERIFIER.check(batch_request(proof, i), workspace.GET) == "gateway"


async def test_a_batchs_signature_vouches_for_its_own_claims_only() -> None:
    """A thief holding one request of a batch (its claims, the signature, the digests of all) cannot make a
    request of its own out of them: new claims are not among the digests, and digests added to the list
    are not what was signed, though the owner already verified the genuine list."""
    key = CountingKey(KEYS["gateway"])
    verifier = ProofVerifier({"gateway": key})  # type: ignore[dict-item]
    proofs = await batch(ProofSigner("gateway", KEYS["gateway"]), 3)
    assert verifier.check(batch_request(proofs[0], 0), workspace.GET) == "gateway"
    _, signature, digests = parts(proofs[1])
    forged = parts(ProofSigner("gateway", SigningKey.generate()).prove(workspace.GET, ALICE, "req-1", data={}))[0]
    with pytest.raises(Forbidden, match="does not cover its claims"):
        verifier.check(envelope(f"{b64(forged)}.{b64(signature)}.{b64(digests)}"), workspace.GET)
    added = digests + hashlib.sha256(forged).digest()
    with pytest.raises(Forbidden, match="does not verify"):
        verifier.check(envelope(f"{b64(forged)}.{b64(signature)}.{b64(added)}"), workspace.GET)
    assert key.verified == 2
    # The genuine requests of the batch are untouched by the attempts.
    assert verifier.check(batch_request(proofs[1], 1), workspace.GET) == "gateway"
    assert key.verified == 2


@pytest.mark.parametrize(
    ("what", "digests"),
    [("none", b""), ("a torn digest", b"x" * 31), ("more than one batch", b"x" * DIGEST_BYTES * (MAX_BATCH + 1))],
)
def test_a_digest_list_not_of_whole_digests_is_malformed(what: str, digests: bytes) -> None:
    claims, signature, _ = parts(prove("gateway", workspace.GET))
    with pytest.raises(Forbidden, match="malformed"):
        VERIFIER.check(envelope(f"{b64(claims)}.{b64(signature)}.{b64(digests)}"), workspace.GET)


def test_a_proof_of_the_one_signature_per_request_form_is_malformed() -> None:
    claims, _, _ = parts(prove("gateway", workspace.GET))
    signature = KEYS["gateway"].sign(b"dossier-proof\n" + claims).signature
    with pytest.raises(Forbidden, match="malformed"):
        VERIFIER.check(envelope(f"{b64(claims)}.{b64(signature)}"), workspace.GET)


def test_the_verifier_remembers_a_bounded_number_of_signatures() -> None:
    key = CountingKey(KEYS["gateway"])
    verifier = ProofVerifier({"gateway": key})  # type: ignore[dict-item]
    signer = ProofSigner("gateway", KEYS["gateway"])
    for i in range(VERIFIED_SIGNATURES + 10):
        proof = signer.prove(workspace.GET, ALICE, f"req-{i}", data={})
        verifier.check(envelope(proof, request_id=f"req-{i}"), workspace.GET)
    assert len(verifier._verified) == VERIFIED_SIGNATURES
