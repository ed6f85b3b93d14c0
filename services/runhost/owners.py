"""Every call runhost makes to another service, each named for what it crosses."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from shared.bus import BusClient
from shared.contracts import artifact, assets
from shared.contracts import publication as pub
from shared.contracts import workspace as ws
from shared.contracts.common import Actor, Ref

WORKSPACE_ADMISSION = ws.ADMISSION
WORKSPACE_ASSOCIATE = ws.ASSOCIATE
WORKSPACE_CHECKPOINT_GET = ws.CHECKPOINT_GET
WORKSPACE_CHECKPOINT_PROPOSE = ws.CHECKPOINT_PROPOSE
WORKSPACE_PIN_ARTIFACT = ws.PIN_ARTIFACT
ARTIFACT_REGISTER = artifact.REGISTER
ASSETS_SEARCH = assets.SEARCH
ASSETS_READ = assets.READ


class Owners:
    def __init__(self, bus: Callable[[], BusClient]):
        self._bus = bus

    @property
    def bus(self) -> BusClient:
        return self._bus()

    async def ensure_workspace_exists(self, actor: Actor, *, workspace_id: str) -> None:
        """Raises `not_found` for a missing, deleted or other-scope workspace."""
        await self.bus.call(ws.GET, {"workspace_id": workspace_id}, actor=actor)

    async def fetch_admission_snapshot(self, actor: Actor, *, workspace_id: str, run_id: str) -> dict[str, Any]:
        return dict(
            await self.bus.call(WORKSPACE_ADMISSION, {"workspace_id": workspace_id, "run_id": run_id}, actor=actor)
        )

    async def check_publications(self, actor: Actor, refs: list[Ref]) -> list[dict[str, Any]]:
        reply = await self.bus.call(pub.CHECK, {"refs": [r.model_dump() for r in refs]}, actor=actor)
        return list(reply["items"])

    async def read_publication_for_run(self, actor: Actor, grant: str, *, id: str, version: int) -> dict[str, Any]:
        return dict(await self.bus.call(pub.READ, {"id": id, "version": version}, actor=actor, grant=grant))

    async def search_evidence_for_run(
        self, actor: Actor, grant: str, *, query: str, limit: int
    ) -> list[dict[str, Any]]:
        reply = await self.bus.call(ASSETS_SEARCH, {"q": query, "limit": limit}, actor=actor, grant=grant)
        return list(reply["items"])

    async def read_evidence_for_run(self, actor: Actor, grant: str, *, evidence_id: str) -> dict[str, Any]:
        return dict(await self.bus.call(ASSETS_READ, {"evidence_id": evidence_id}, actor=actor, grant=grant))

    async def publish_answer(self, actor: Actor, request: pub.CommitRequest) -> dict[str, Any]:
        return dict(await self.bus.call(pub.COMMIT, request, actor=actor))

    async def associate_with_workspace(
        self, actor: Actor, *, workspace_id: str, kind: str, ref_id: str, version: int | None, run_id: str | None
    ) -> dict[str, Any]:
        data = {"workspace_id": workspace_id, "kind": kind, "ref_id": ref_id, "version": version, "run_id": run_id}
        return dict(await self.bus.call(WORKSPACE_ASSOCIATE, data, actor=actor))

    async def fetch_checkpoint_revision(self, actor: Actor, *, workspace_id: str) -> int:
        from shared.errors import NotFound

        try:
            checkpoint = await self.bus.call(WORKSPACE_CHECKPOINT_GET, {"workspace_id": workspace_id}, actor=actor)
        except NotFound:
            return 0
        return int(checkpoint["revision"])

    async def propose_checkpoint(self, actor: Actor, proposal: dict[str, Any]) -> dict[str, Any]:
        return dict(await self.bus.call(WORKSPACE_CHECKPOINT_PROPOSE, proposal, actor=actor))

    async def register_report_artifact(self, actor: Actor, blob: dict[str, Any]) -> dict[str, Any]:
        return dict(await self.bus.call(ARTIFACT_REGISTER, blob, actor=actor))

    async def pin_report_artifact(self, actor: Actor, *, workspace_id: str, artifact_id: str) -> dict[str, Any]:
        data = {"workspace_id": workspace_id, "artifact_id": artifact_id}
        return dict(await self.bus.call(WORKSPACE_PIN_ARTIFACT, data, actor=actor))
