"""The per-token request rate, against a real gateway process: over it, 429 `rate_limited` with
Retry-After, for that token only, until the bucket has refilled."""

from __future__ import annotations

from pathlib import Path

import httpx

from shared.settings import GatewaySettings
from tests.support.api import gateway_client, probe
from tests.support.gateway import csrf_of, running_gateway, sign_in, workers_answering, workers_in_log
from tests.support.infra import Infra


def test_the_default_rate_is_the_contracts() -> None:
    settings = GatewaySettings()
    assert (settings.rate_per_token, settings.rate_burst) == (50.0, 100)


def test_a_token_over_its_rate_is_answered_429_with_retry_after(infra: Infra, tmp_path: Path) -> None:
    with running_gateway(infra, tmp_path, DOSSIER_RATE_PER_TOKEN="1", DOSSIER_RATE_BURST="5") as gateway:
        busy, other = gateway.token(principal="busy"), gateway.token(principal="other")
        with gateway_client(base_url=gateway.url, timeout=30) as client:

            def ask(token: str) -> httpx.Response:
                # limit=0 is refused by the route itself (422): a request that needs no other service.
                return client.get("/v1/workspaces?limit=0", headers={"Authorization": f"Bearer {token}"})

            # Five at once, then one a second: a client asking faster than that is refused.
            replies = [ask(busy) for _ in range(100)]
            refused = [r for r in replies if r.status_code == 429]
            assert refused, "a hundred requests in a row were all let through"
            assert all(r.status_code in (422, 429) for r in replies)
            r = refused[0]
            assert r.json()["error"]["code"] == "rate_limited"
            assert r.headers["retry-after"].isdigit() and int(r.headers["retry-after"]) >= 1
            assert r.json()["error"]["details"]["retry_after"] == int(r.headers["retry-after"])
            assert r.headers.get("x-request-id")

            assert ask(other).status_code == 422, "another token is not slowed by this one"
            probe(lambda: ask(busy).status_code == 422, timeout=30)


def test_workbench_pages_count_against_their_tokens_rate(infra: Infra, tmp_path: Path) -> None:
    # One request in a hundred seconds past the first five: nothing refills while the test runs.
    with running_gateway(infra, tmp_path, DOSSIER_RATE_PER_TOKEN="0.01", DOSSIER_RATE_BURST="5") as gateway:
        token = gateway.token()
        with gateway_client(base_url=gateway.url, timeout=30) as browser:
            sign_in(browser, token)  # one of the five
            pages = [browser.get("/import") for _ in range(10)]
            refused = [p for p in pages if p.status_code == 429]
            assert len(refused) == 6, [p.status_code for p in pages]
            assert refused[0].headers["retry-after"].isdigit() and "Too many requests" in refused[0].text
        # The same bucket as the token's API requests.
        r = httpx.get(f"{gateway.url}/v1/workspaces?limit=0", headers={"Authorization": f"Bearer {token}"})
        assert r.status_code == 429


def test_signing_in_counts_against_the_tokens_rate(infra: Infra, tmp_path: Path) -> None:
    with running_gateway(infra, tmp_path, DOSSIER_RATE_PER_TOKEN="0.01", DOSSIER_RATE_BURST="3") as gateway:
        token, other = gateway.token(), gateway.token(principal="bob")
        for _ in range(3):
            with gateway_client(base_url=gateway.url, timeout=30) as browser:
                sign_in(browser, token)
        with gateway_client(base_url=gateway.url, timeout=30) as browser:
            form = browser.get("/signin")
            r = browser.post("/signin", data={"csrf": csrf_of(form), "token": token, "next": "/import"})
            assert r.status_code == 429 and r.headers["retry-after"].isdigit(), r.text[:300]
            assert "dossier_session" not in browser.cookies, "a refused sign-in opens no session"
        with gateway_client(base_url=gateway.url, timeout=30) as browser:
            sign_in(browser, other)  # another token's bucket is its own


def test_a_tokens_rate_holds_across_the_workers_of_a_port(infra: Infra, tmp_path: Path) -> None:
    # `python -m services.gateway` with two workers (a container's entry point): a token's ten requests are
    # its ten on the port, whichever worker each of its connections lands on.
    workers = {"DOSSIER_GATEWAY_WORKERS": "2", "DOSSIER_RATE_PER_TOKEN": "0.01", "DOSSIER_RATE_BURST": "10"}
    with running_gateway(infra, tmp_path, **workers) as gateway:
        token = gateway.token()
        # The port opens with the first worker to listen: the token's requests wait until both serve it,
        # found with requests that carry no token and so take nothing from its bucket.
        probe(lambda: workers_answering(gateway.url, tmp_path / "gateway.log", "req_rate_warm") == {1, 2}, timeout=60)
        headers = {"Authorization": f"Bearer {token}", "X-Request-ID": "req_rate_workers", "Connection": "close"}
        replies = [httpx.get(f"{gateway.url}/v1/workspaces?limit=0", headers=headers) for _ in range(40)]
        assert [r.status_code for r in replies].count(422) == 10, [r.status_code for r in replies]
        assert {r.status_code for r in replies} == {422, 429}
        assert workers_in_log(tmp_path / "gateway.log", "req_rate_workers") == {1, 2}, (
            "both workers answered some of the token's requests"
        )
