"""The workspace service in-process on real NATS and PostgreSQL, with the real owner services it talks to.

Publication and artifact are the real services. Assets does not exist on this branch, so its check is
answered by a stand-in on the real bus (`tests.support.owners.AssetsStandIn`), in the contract's shape.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import asyncpg
import pytest

from services.artifact.app import create_app as create_artifact
from services.publication.app import create_app as create_publication
from services.workspace.app import create_app as create_workspace
from shared.blobs import Blobs, content_key
from shared.bus import BusClient
from shared.contracts import artifact as a
from shared.contracts import workspace as w
from shared.contracts.common import Actor
from shared.natsauth import workspace_durables
from shared.runtime import ServiceRuntime
from shared.settings import ArtifactSettings, PublicationSettings, WorkspaceSettings
from tests.support.infra import Infra
from tests.support.owners import AssetsStandIn, EventTap, create_durables_from_now, delete_durables
from tests.support.probe import probe_until
from tests.support.service import running, settings_from


@asynccontextmanager
async def serving(runtime: ServiceRuntime, bus: BusClient) -> AsyncIterator[ServiceRuntime]:
    """`running`, then wait until the service answers the test's own connection on the bus."""
    async with running(runtime):
        await probe_until(lambda: bus.ping(runtime.name, timeout=1.0))
        yield runtime


@pytest.fixture
async def workspace(infra: Infra, bus: BusClient) -> AsyncIterator[WorkspaceSettings]:
    prefix = f"wstest{uuid.uuid4().hex[:8]}"
    env = infra.settings_env("workspace", DOSSIER_CONSUMER_PREFIX=prefix, DOSSIER_RETAIN_TIMEOUT="60")
    settings = settings_from(env, WorkspaceSettings)
    durables = workspace_durables(prefix)
    await create_durables_from_now(bus._nc, durables)
    try:
        async with serving(create_workspace(settings), bus):
            yield settings
    finally:
        await delete_durables(bus._nc, durables)


@pytest.fixture
async def publication(infra: Infra, bus: BusClient) -> AsyncIterator[PublicationSettings]:
    settings = settings_from(infra.settings_env("publication"), PublicationSettings)
    async with serving(create_publication(settings), bus):
        yield settings


@dataclass
class ArtifactOwner:
    settings: ArtifactSettings
    blobs: Blobs

    async def register(self, bus: BusClient, who: Actor, **extra: Any) -> dict[str, Any]:
        data = f"<!doctype html><p>{uuid.uuid4().hex}</p>".encode()
        sha = hashlib.sha256(data).hexdigest()
        await self.blobs.put_bytes(content_key(sha), data)
        request = {
            "bucket": self.blobs.bucket,
            "key": content_key(sha),
            "sha256": sha,
            "size": len(data),
            "title": "Chart pack",
            "media_type": "text/html",
        }
        return dict(await bus.call_raw(a.REGISTER, request | extra, actor=who))


@pytest.fixture
async def artifact(infra: Infra, bus: BusClient) -> AsyncIterator[ArtifactOwner]:
    settings = settings_from(infra.settings_env("artifact"), ArtifactSettings)
    await Blobs(settings).ensure_bucket()
    async with serving(create_artifact(settings), bus):
        # The artifact service's key only asks whether bytes are there; the gateway writes them.
        yield ArtifactOwner(settings, infra.blobs_as("tester", settings.s3_bucket))


@pytest.fixture
async def assets(bus: BusClient) -> AsyncIterator[AssetsStandIn]:
    stand_in = await AssetsStandIn(bus._nc).start()
    try:
        yield stand_in
    finally:
        await stand_in.stop()


@pytest.fixture
def who() -> Actor:
    return Actor(scope=f"s{uuid.uuid4().hex[:8]}", principal="alice")


@pytest.fixture
def stranger() -> Actor:
    return Actor(scope=f"x{uuid.uuid4().hex[:8]}", principal="mallory")


@pytest.fixture
async def events(bus: BusClient, who: Actor) -> AsyncIterator[EventTap]:
    tap = await EventTap(bus._nc, who.scope).start()
    try:
        yield tap
    finally:
        await tap.stop()


@pytest.fixture
async def ws_db(workspace: WorkspaceSettings) -> AsyncIterator[asyncpg.Connection]:
    """A direct look into the workspace database, to prove what was (not) recorded."""
    conn = await asyncpg.connect(workspace.database_url)
    try:
        yield conn
    finally:
        await conn.close()


async def create(
    bus: BusClient, who: Actor, title: str = "Fund X liquidity", goal: str = "Assess it"
) -> dict[str, Any]:
    return dict(await bus.call_raw(w.CREATE, {"title": title, "goal": goal}, actor=who))


async def catalog(bus: BusClient, who: Actor, workspace_id: str, limit: int | None = None) -> dict[str, Any]:
    return dict(await bus.call_raw(w.CATALOG, {"workspace_id": workspace_id, "limit": limit}, actor=who))
