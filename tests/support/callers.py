"""Tests only: a signer that vouches for test code's calls as the process that makes each call in production.

Test code stands in for the gateway (user requests), runhost (a run's calls) and workspace (owner checks):
for each subject it signs as the first signer trusted there (shared/proof.py `TRUSTED`), the gateway
where it is, so a test's call is refused or allowed exactly as that process's would be.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nacl.signing import SigningKey

from shared.contracts.common import Actor
from shared.proof import SIGNERS, TRUSTED, ProofSigner


class CallerSigner(ProofSigner):
    def __init__(self, keys: Mapping[str, SigningKey]):
        super().__init__("gateway", keys["gateway"])
        self._signers = {name: ProofSigner(name, keys[name]) for name in SIGNERS}

    def _signer(self, subject: str) -> ProofSigner:
        trusted = TRUSTED.get(subject, frozenset())
        return self._signers[next((name for name in SIGNERS if name in trusted), "gateway")]

    def prove(self, subject: str, actor: Actor, request_id: str, **how: Any) -> str:
        return self._signer(subject).prove(subject, actor, request_id, **how)

    async def prove_batched(self, subject: str, actor: Actor, request_id: str, **how: Any) -> str:
        return await self._signer(subject).prove_batched(subject, actor, request_id, **how)
