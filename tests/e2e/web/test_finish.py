"""The workbench's finish: pages travel gzip-compressed, breadcrumbs lead back to the workspace with their
words apart, and a wrong token is refused in words a person reads (the history picker's 24 px boxes are
checked in test_workspace.py).

axe-core runs on every page shown here (tests/e2e/web/axe.py), at 1280 px and 390 px.
"""

from __future__ import annotations

from playwright.sync_api import Page, expect

from tests.e2e.web.axe import audit
from tests.e2e.web.conftest import User, fund_x_workspace
from tests.support.api import gateway_client
from tests.support.documents import QUESTION


def test_pages_are_gzipped_and_downloads_are_not(user: User) -> None:
    fund = fund_x_workspace(user.api, "Fund X gzip")
    cookies = {c["name"]: c["value"] for c in user.context.cookies()}
    with gateway_client(base_url=user.url, cookies=cookies) as client:
        page = client.get(f"/workspaces/{fund.workspace['id']}", headers={"Accept-Encoding": "gzip"})
        assert page.status_code == 200
        assert page.headers["content-encoding"] == "gzip"
        assert "Accept-Encoding" in page.headers["vary"]
        assert "<h1>" in page.text  # httpx decodes it
        plain = client.get(f"/workspaces/{fund.workspace['id']}", headers={"Accept-Encoding": "identity"})
        assert "content-encoding" not in plain.headers and "<h1>" in plain.text
        original = client.get(f"/sources/{fund.source_id}/versions/1/original", headers={"Accept-Encoding": "gzip"})
        assert original.status_code == 200 and "content-encoding" not in original.headers


def test_breadcrumbs_lead_back_with_their_words_apart(user: User) -> None:
    fund = fund_x_workspace(user.api, "Fund X liquidity")
    run = user.api.wait_run(user.api.start_run(fund.workspace["id"], QUESTION, history=fund.history)["id"])
    page = user.page()
    page.goto(f"/runs/{run['id']}/files/plan.md")
    crumbs = page.get_by_role("navigation", name="Breadcrumbs")
    expect(crumbs).to_contain_text(f"{fund.workspace['title']} › Run:")
    crumbs.get_by_role("link", name=fund.workspace["title"]).click()
    page.wait_for_url(f"**/workspaces/{fund.workspace['id']}")


def test_a_wrong_token_is_refused_in_plain_words(anonymous: Page) -> None:
    page = anonymous
    page.goto("/signin")
    page.get_by_label("Token").fill("not-a-token at all")
    page.get_by_role("button", name="Sign in").click()
    alert = page.get_by_role("alert")
    expect(alert).to_contain_text("That is not a Dossier token")
    expect(alert).not_to_contain_text("bearer")
    expect(alert).not_to_contain_text("malformed")
    page.get_by_label("Token").fill("dsk_" + "q" * 40)
    page.get_by_role("button", name="Sign in").click()
    expect(alert).to_contain_text("That token is not known here")
    expect(alert).not_to_contain_text("bearer")
    audit(page)
