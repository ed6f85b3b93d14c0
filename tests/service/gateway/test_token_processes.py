"""Token revocation and expiry across gateway processes: two real gateways on one token database.

Each process caches resolved tokens; only the database knows that another process revoked one. The contract
bound is 5 seconds, in every gateway process.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from services.gateway.tokens import TokenService
from shared.contracts.gateway import IssueTokenRequest
from shared.db import Database
from shared.errors import Unauthenticated
from tests.support.api import probe
from tests.support.gateway import gateways_on_one_database
from tests.support.infra import Infra
from tests.support.probe import probe_until

MIGRATIONS = Path(__file__).resolve().parents[3] / "services" / "gateway" / "migrations"


@pytest.fixture
def gateways(infra: Infra, tmp_path: Path) -> Iterator[tuple[str, str, str]]:
    """Two gateway processes sharing one database: their URLs and the admin token."""
    with gateways_on_one_database(infra, tmp_path) as running:
        yield running


def authenticated(url: str, token: str) -> bool:
    """Whether the gateway lets the token past auth (no domain service runs here: anything but 401 passes)."""
    r = httpx.get(f"{url}/v1/workspaces", headers={"Authorization": f"Bearer {token}"}, timeout=30)
    return r.status_code != 401


def test_revoked_in_one_process_is_refused_by_the_other(gateways: tuple[str, str, str]) -> None:
    first, second, admin = gateways
    auth = {"Authorization": f"Bearer {admin}"}
    issued = httpx.post(f"{first}/v1/admin/tokens", json={"scope": "acme", "principal": "alice"}, headers=auth).json()
    assert authenticated(second, issued["token"])  # the second process has resolved and cached it

    started = time.monotonic()
    assert httpx.delete(f"{first}/v1/admin/tokens/{issued['id']}", headers=auth).status_code == 204
    probe(lambda: not authenticated(second, issued["token"]), timeout=5)
    print(f"revocation seen by the other process after {time.monotonic() - started:.2f}s")
    assert not authenticated(first, issued["token"])


def test_expiry_is_enforced_by_every_process(gateways: tuple[str, str, str]) -> None:
    first, second, admin = gateways
    auth = {"Authorization": f"Bearer {admin}"}
    body = {"scope": "acme", "principal": "bob", "expires_in": 3}
    issued = httpx.post(f"{first}/v1/admin/tokens", json=body, headers=auth).json()
    assert authenticated(second, issued["token"])
    probe(lambda: not authenticated(second, issued["token"]), timeout=30)
    assert not authenticated(first, issued["token"])


async def test_a_cached_token_still_expires_on_time(infra: Infra) -> None:
    """Expiry is checked against the row's expires_at on every request, not only when the cache refreshes."""
    db = Database(infra.dsn(f"gateway_{secrets.token_hex(5)}"))
    await db.connect(MIGRATIONS)
    try:
        tokens = TokenService(db, admin_token="adm_test", cache_seconds=3600)
        issued = await tokens.issue(IssueTokenRequest(scope="acme", principal="carol", expires_in=2))
        assert (await tokens.resolve(issued.token)).principal == "carol"

        async def refused() -> str | None:
            try:
                await tokens.resolve(issued.token)
            except Unauthenticated as exc:
                return exc.message
            return None

        assert "expired" in await probe_until(refused, timeout=30)
    finally:
        await db.close()
