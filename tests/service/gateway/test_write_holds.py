"""A write hold across gateway processes: two real gateways on one database, a hold taken through one.

Writes wait at both while it lasts and go on when it is released or its seconds are up; reads go on all the
while. Only admin routes are used (they need no domain service): issuing a token is the write, listing
tokens the read.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.api import probe
from tests.support.gateway import gateways_on_one_database
from tests.support.infra import Infra

HOLD = "/v1/admin/writes/hold"


@pytest.fixture
def gateways(infra: Infra, tmp_path: Path) -> Iterator[tuple[str, str, str]]:
    """Two one-worker gateway processes sharing one database: their URLs and the admin token."""
    with gateways_on_one_database(infra, tmp_path, DOSSIER_GATEWAY_WORKERS="1") as running:
        yield running


def issue(url: str, admin: str) -> httpx.Response:
    body = {"scope": "holds", "principal": "writer"}
    return httpx.post(f"{url}/v1/admin/tokens", json=body, headers={"Authorization": f"Bearer {admin}"}, timeout=120)


def test_a_hold_taken_at_one_process_holds_writes_at_every_one(gateways: tuple[str, str, str]) -> None:
    first, second, admin = gateways
    auth = {"Authorization": f"Bearer {admin}"}
    held = httpx.post(f"{first}{HOLD}", json={"seconds": 120}, headers=auth, timeout=30)
    assert held.status_code == 200, held.text
    # Both processes listen on the database: both said they hold before the route answered.
    assert held.json()["held"] and held.json()["processes"] >= 2
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        writes = [pool.submit(issue, url, admin) for url in (first, second)]
        for url in (first, second):
            read = httpx.get(f"{url}/v1/admin/tokens", headers=auth, timeout=30)
            assert read.status_code == 200, read.text
        assert not any(write.done() for write in writes), "a write went through while writes were held"

        released = httpx.delete(f"{second}{HOLD}", headers=auth, timeout=30)
        assert released.status_code == 200 and not released.json()["held"]
        assert [write.result(timeout=60).status_code for write in writes] == [201, 201]


def test_a_hold_ends_by_itself_when_its_seconds_are_up(gateways: tuple[str, str, str]) -> None:
    first, second, admin = gateways
    auth = {"Authorization": f"Bearer {admin}"}
    assert httpx.post(f"{first}{HOLD}", json={"seconds": 2}, headers=auth, timeout=30).status_code == 200
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        write = pool.submit(issue, second, admin)
        probe(write.done, timeout=60)
        assert write.result().status_code == 201


def test_a_hold_is_for_the_admin_alone_and_bounded(gateways: tuple[str, str, str]) -> None:
    first, _, admin = gateways
    user = issue(first, admin).json()["token"]
    refused = httpx.post(f"{first}{HOLD}", json={"seconds": 5}, headers={"Authorization": f"Bearer {user}"})
    assert refused.status_code == 401 and refused.json()["error"]["code"] == "unauthenticated"
    auth = {"Authorization": f"Bearer {admin}"}
    for seconds in (0, 301, 1.5, "5"):
        r = httpx.post(f"{first}{HOLD}", json={"seconds": seconds}, headers=auth)
        assert r.status_code == 422, (seconds, r.text)
