"""An external run in the browser: the page says an outside agent drives it, shows its lease, and a person
can take it over (the new token shown once, the old one fenced)."""

from __future__ import annotations

from playwright.sync_api import expect

from tests.e2e.web.conftest import User


def test_an_external_run_shows_its_lease_and_can_be_taken_over(user: User) -> None:
    ws = user.api.workspace()
    run = user.api.start_run(ws["id"], "Driven from outside?", driver="external")
    old = run["lease"]["token"]
    page = user.page()
    page.goto(f"/runs/{run['id']}")
    expect(page.get_by_role("heading", name="Driven by an outside agent")).to_be_visible()
    expect(page.locator("#lease")).to_contain_text("epoch")
    expect(page.locator("#lease")).to_contain_text("1")
    page.get_by_role("button", name="Take over this run").click()
    expect(page.locator("#new-lease")).to_contain_text("epoch 2")
    token = page.locator("#new-lease code").inner_text().strip()
    assert token.startswith("rl_") and token != old
    stale = user.api.http.get(f"/v1/runs/{run['id']}/catalog", headers={"X-Run-Lease": old})
    assert stale.status_code == 409 and stale.json()["error"]["details"]["current_epoch"] == 2
    fresh = user.api.http.get(f"/v1/runs/{run['id']}/catalog", headers={"X-Run-Lease": token})
    assert fresh.status_code == 200
    page.goto(f"/runs/{run['id']}")
    expect(page.locator("#lease")).to_contain_text("2")
    assert token not in page.content(), "the token is shown once, on the take-over's own page"
