"""Fixtures on real processes: `infra` (NATS, PostgreSQL, S3) for service tests, `stack` for e2e tests."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from shared.bus import BusClient
from tests.support.infra import Infra, container_infra, docker_available, local_infra
from tests.support.stack import RunningStack, start_stack, stop_stack


@pytest.fixture(scope="session")
def infra(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Infra]:
    if docker_available():
        with container_infra(tmp_path_factory.mktemp("infra")) as value:
            yield value
    else:
        with local_infra(tmp_path_factory.mktemp("infra")) as value:
            yield value


@pytest.fixture
async def bus(infra: Infra) -> AsyncIterator[BusClient]:
    nc = await infra.connect()
    try:
        yield BusClient(nc, timeout=5.0)
    finally:
        await nc.close()


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    """One whole stack for all e2e tests of the session; tests isolate themselves by scope."""
    docs = tmp_path_factory.mktemp("approved-docs")
    running = start_stack(tmp_path_factory.mktemp("stack-home"), extra_env={"DOSSIER_APPROVED_ROOTS": f"docs={docs}"})
    running.approved_roots = {"docs": docs}
    try:
        yield running
    finally:
        stop_stack(running.proc)
