"""Runhost's database for its service tests: a database of its own per test, migrated as runhost migrates it."""

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
