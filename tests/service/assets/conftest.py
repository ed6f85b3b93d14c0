"""The assets service in-process against real NATS, PostgreSQL and S3, and helpers to feed it bytes."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import asyncpg
import pytest
from nacl.signing import SigningKey

from services.assets.app import create_app
from shared.blobs import Blobs, content_key
from shared.bus import BusClient
from shared.contracts import assets as c
from shared.contracts.common import Actor
from shared.proof import load_private_key
from shared.settings import AssetsSettings
from tests.support.infra import Infra
from tests.support.service import running, settings_from


@dataclass
class AssetsUnderTest:
    settings: AssetsSettings
    blobs: Blobs
    bus: BusClient
    # Runhost's key, to mint the run grants a test presents (the assets service holds only its public half).
    grant_key: SigningKey | None = None

    async def put(self, data: bytes) -> dict[str, Any]:
        digest = hashlib.sha256(data).hexdigest()
        key = content_key(digest)
        await self.blobs.put_bytes(key, data)
        return {"bucket": self.blobs.bucket, "key": key, "sha256": digest, "size": len(data)}

    async def upload(self, who: Actor, source_id: str, data: bytes, **extra: Any) -> dict[str, Any]:
        blob = await self.put(data)
        payload = {"source_id": source_id, "blob": blob, "filename": extra.pop("filename", "file.bin"), **extra}
        result: dict[str, Any] = await self.bus.call_raw(c.UPLOAD, payload, actor=who, timeout=120)
        return result

    @asynccontextmanager
    async def db(self) -> AsyncIterator[asyncpg.Connection]:
        """A connection to the service's own database, closed when the block ends."""
        conn = await asyncpg.connect(self.settings.database_url)
        try:
            yield conn
        finally:
            await conn.close()


def actor(scope: str | None = None) -> Actor:
    return Actor(scope=scope or f"s{uuid.uuid4().hex[:8]}", principal="alice")


def assets_env(infra: Infra, **extra: str) -> dict[str, str]:
    return infra.settings_env("assets", **extra)


@pytest.fixture
def make_settings(infra: Infra) -> Callable[..., AssetsSettings]:
    def make(**extra: str) -> AssetsSettings:
        settings: AssetsSettings = settings_from(assets_env(infra, **extra), AssetsSettings)
        return settings

    return make


@pytest.fixture
async def assets(
    make_settings: Callable[..., AssetsSettings], bus: BusClient, infra: Infra
) -> AsyncIterator[AssetsUnderTest]:
    settings = make_settings()
    async with running(create_app(settings)):
        yield AssetsUnderTest(settings, Blobs(settings), bus, load_private_key(infra.proof_keys["runhost"]))
