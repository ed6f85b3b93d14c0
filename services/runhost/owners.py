"""Every call runhost makes to another service, each named for what it crosses, with typed replies."""

from __future__ import annotations

from collections.abc import Callable

from shared.bus import BusClient
from shared.contracts import artifact, assets
from shared.contracts import publication as pub
from shared.contracts import workspace as ws
from shared.contracts.common import Actor, CheckRequest, Eligibility, Ref
from shared.errors import NotFound

WORKSPACE_ADMISSION = ws.ADMISSION
WORKSPACE_CATALOG_ADMITTED = ws.CATALOG_ADMITTED
WORKSPACE_CATALOG_HOLDS = ws.CATALOG_HOLDS
WORKSPACE_ASSOCIATE = ws.ASSOCIATE
WORKSPACE_CHECKPOINT_GET = ws.CHECKPOINT_GET
WORKSPACE_CHECKPOINT_PROPOSE = ws.CHECKPOINT_PROPOSE
WORKSPACE_PIN_ARTIFACT = ws.PIN_ARTIFACT
ARTIFACT_REGISTER = artifact.REGISTER
ASSETS_SEARCH = assets.SEARCH
ASSETS_READ = assets.READ
ASSETS_CHECK = assets.CHECK


class Owners:
    def __init__(self, bus: Callable[[], BusClient]):
        self._bus = bus

    @property
    def bus(self) -> BusClient:
        return self._bus()

    async def ensure_workspace_exists(self, actor: Actor, *, workspace_id: str) -> None:
        """Raises `not_found` for a missing, deleted or other-scope workspace."""
        await self.bus.call(ws.GET, ws.WorkspaceIdRequest(workspace_id=workspace_id), actor=actor)

    async def fetch_admission_snapshot(self, actor: Actor, *, workspace_id: str, run_id: str) -> ws.Admission:
        request = ws.AdmissionRequest(workspace_id=workspace_id, run_id=run_id)
        return await self.bus.call(WORKSPACE_ADMISSION, request, actor=actor)

    async def fetch_admitted_catalog_page(
        self, actor: Actor, *, workspace_id: str, as_of: int, cursor: str
    ) -> ws.Catalog:
        """A later page of a run's catalog, as it was at the run's admission."""
        request = ws.AdmittedCatalogRequest(workspace_id=workspace_id, as_of=as_of, cursor=cursor)
        return await self.bus.call(WORKSPACE_CATALOG_ADMITTED, request, actor=actor)

    async def admitted_catalog_holds(self, actor: Actor, *, workspace_id: str, as_of: int, ref: Ref) -> bool:
        """Whether a run's catalog as admitted holds `ref` (by kind and id), on whatever page."""
        if ref.kind not in ("publication", "source"):
            return False
        request = ws.CatalogHoldsRequest(workspace_id=workspace_id, as_of=as_of, kind=ref.kind, id=ref.id)
        return (await self.bus.call(WORKSPACE_CATALOG_HOLDS, request, actor=actor)).held

    async def check_publications(self, actor: Actor, refs: list[Ref]) -> list[Eligibility]:
        reply = await self.bus.call(pub.CHECK, CheckRequest(refs=refs), actor=actor)
        return reply.items

    async def check_sources(self, actor: Actor, refs: list[Ref]) -> list[Eligibility]:
        reply = await self.bus.call(ASSETS_CHECK, CheckRequest(refs=refs), actor=actor)
        return reply.items

    async def read_publication_for_run(
        self, actor: Actor, grant: str, *, id: str, version: int
    ) -> pub.PublicationVersion:
        request = pub.ReadRequest(id=id, version=version)
        return await self.bus.call(pub.READ, request, actor=actor, grant=grant)

    async def search_publications_for_run(
        self, actor: Actor, grant: str, *, query: str, limit: int, offset: int = 0
    ) -> list[pub.PublicationHit]:
        request = pub.PublicationSearchRequest(q=query, limit=limit, offset=offset)
        return (await self.bus.call(pub.RUN_SEARCH, request, actor=actor, grant=grant)).items

    async def search_evidence_for_run(
        self, actor: Actor, grant: str, *, query: str, limit: int, source_id: str | None = None
    ) -> list[assets.SearchHit]:
        request = assets.SearchRequest(q=query, limit=limit, source_id=source_id)
        return (await self.bus.call(ASSETS_SEARCH, request, actor=actor, grant=grant)).items

    async def read_evidence_for_run(self, actor: Actor, grant: str, *, evidence_id: str) -> assets.Evidence:
        request = assets.EvidenceReadRequest(evidence_id=evidence_id)
        return await self.bus.call(ASSETS_READ, request, actor=actor, grant=grant)

    async def publish_answer(self, actor: Actor, request: pub.CommitRequest) -> pub.PublicationVersion:
        return await self.bus.call(pub.COMMIT, request, actor=actor)

    async def associate_with_workspace(self, actor: Actor, request: ws.AssociateRequest) -> ws.AssociateReply:
        return await self.bus.call(WORKSPACE_ASSOCIATE, request, actor=actor)

    async def fetch_checkpoint_revision(self, actor: Actor, *, workspace_id: str) -> int:
        request = ws.WorkspaceIdRequest(workspace_id=workspace_id)
        try:
            checkpoint = await self.bus.call(WORKSPACE_CHECKPOINT_GET, request, actor=actor)
        except NotFound:
            return 0
        return checkpoint.revision

    async def propose_checkpoint(self, actor: Actor, proposal: ws.ProposeRequest) -> ws.ProposeReply:
        raw = ws.RawProposal.model_validate(proposal.model_dump())
        return await self.bus.call(WORKSPACE_CHECKPOINT_PROPOSE, raw, actor=actor)

    async def register_report_artifact(self, actor: Actor, blob: artifact.RegisterRequest) -> artifact.Artifact:
        return await self.bus.call(ARTIFACT_REGISTER, blob, actor=actor)

    async def pin_report_artifact(
        self, actor: Actor, *, workspace_id: str, artifact_id: str, run_id: str
    ) -> ws.PinReply:
        """The run's report, pinned as the run's (its publication is the catalog item, not the report)."""
        request = ws.PinRequest(workspace_id=workspace_id, artifact_id=artifact_id, run_id=run_id)
        return await self.bus.call(WORKSPACE_PIN_ARTIFACT, request, actor=actor)
