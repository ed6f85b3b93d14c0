"""What the proof of caller costs per request: signing and checking one, with the payload's digest and the
single-use id, against the signature alone over the claims (what a proof cost before it covered the payload),
and the same when BATCH requests are asked for in one turn of the event loop and share one signature (what a
busy gateway worker does; shared/proof.py `prove_batched`).

Processor time in this process only, no stack: both ends of one request (the caller's `prove`, the owner's
`check`) for a read's small payload and for a publication of 64 KiB. Run with `make bench` (or
`.venv/bin/python bench/proof.py`). Never part of the test run.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
from nacl.signing import SigningKey

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._stats import BENCH_BODY
from shared.contracts import publication
from shared.contracts.common import Actor, BusRequest
from shared.proof import PROOF_TAG, ProofSigner, ProofVerifier, b64, unb64

N = 20_000
BATCH = 8
ACTOR = Actor(scope="acme", principal="alice")
PAYLOADS: dict[str, tuple[str, dict[str, Any]]] = {
    "a read (2 fields)": (publication.READ, {"id": "pub_0123456789abcdef", "version": 1}),
    "a commit of 64 KiB": (publication.COMMIT, {"title": "Report A", "body": (BENCH_BODY * 19)[:65536]}),
}


def per_request_us(step: Callable[[int], None], n: int = N) -> float:
    for i in range(n // 10):
        step(i)
    started = time.process_time()
    for i in range(n):
        step(i)
    return (time.process_time() - started) / n * 1e6


def main() -> None:
    key = SigningKey.generate()
    signer = ProofSigner("gateway", key)
    verifier = ProofVerifier({"gateway": key.verify_key})
    verify_key = key.verify_key
    print(f"proof of caller, processor time per request (both ends), n={N}")
    for name, (subject, data) in PAYLOADS.items():

        def claims_only(i: int, subject: str = subject) -> None:
            claims = {"iss": "gateway", "scope": "acme", "principal": "alice", "sub": subject, "rid": f"r{i}"}
            signed = PROOF_TAG + orjson.dumps(claims | {"exp": time.time() + 60})
            proof = f"{b64(signed)}.{b64(key.sign(signed).signature)}"
            payload, signature = proof.split(".")
            verify_key.verify(unb64(payload), unb64(signature))

        def whole_request(i: int, subject: str = subject, data: dict[str, Any] = data) -> None:
            proof = signer.prove(subject, ACTOR, f"r{i}", data=data)
            verifier.check(BusRequest(actor=ACTOR, proof=proof, request_id=f"r{i}", data=data), subject)

        def envelope_only(i: int, subject: str = subject, data: dict[str, Any] = data) -> None:
            BusRequest(actor=ACTOR, proof="x", request_id=f"r{i}", data=data)

        base = per_request_us(claims_only) + per_request_us(envelope_only)
        new = per_request_us(whole_request)
        shared = batched_us(signer, verifier, subject, data)
        print(
            f"  {name:<22} signature over the claims {base:8.1f} µs   whole request, once {new:8.1f} µs   ×{new / base:.2f}"
            f"   in batches of {BATCH} {shared:8.1f} µs   ×{shared / base:.2f}"
        )


def batched_us(signer: ProofSigner, verifier: ProofVerifier, subject: str, data: dict[str, Any]) -> float:
    """Per request, BATCH proofs asked for in one turn and each checked by the owner."""

    async def one_batch(k: int) -> None:
        ids = [f"b{k}-{j}" for j in range(BATCH)]
        proofs = await asyncio.gather(*(signer.prove_batched(subject, ACTOR, rid, data=data) for rid in ids))
        for rid, proof in zip(ids, proofs, strict=True):
            verifier.check(BusRequest(actor=ACTOR, proof=proof, request_id=rid, data=data), subject)

    async def measure() -> float:
        batches = N // BATCH
        for k in range(batches // 10):
            await one_batch(k)
        started = time.process_time()
        for k in range(batches):
            await one_batch(k)
        return (time.process_time() - started) / (batches * BATCH) * 1e6

    return asyncio.run(measure())


if __name__ == "__main__":
    main()
