"""What the run host's service tests share: a fresh database of the run host's, migrated."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest

from services.runhost.app import MIGRATIONS
from shared.db import Database
from tests.support.infra import Infra


@pytest.fixture
async def db(infra: Infra) -> AsyncIterator[Database]:
    database = Database(infra.dsn(f"runhost_{uuid.uuid4().hex[:10]}"))
    await database.connect(MIGRATIONS)
    try:
        yield database
    finally:
        await database.close()
