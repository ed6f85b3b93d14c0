"""Searching a workspace: its conclusions and the evidence of its sources, nothing of another workspace's,
each match marked (`<mark>`), no raw highlight markers; the evidence search marks its matches too.

axe-core runs on every page shown here (tests/e2e/web/axe.py), at 1280 px and 390 px.
"""

from __future__ import annotations

from playwright.sync_api import expect

from tests.e2e.web.axe import audit
from tests.e2e.web.conftest import User, fund_x_workspace, unique
from tests.support.documents import QUESTION


def test_a_workspace_search_finds_its_conclusions_and_evidence_marked(user: User) -> None:
    api = user.api
    fund = fund_x_workspace(api, "Fund X search")
    ws = fund.workspace
    run = api.wait_run(api.start_run(ws["id"], QUESTION, history=fund.history)["id"])
    assert run["status"] == "completed"
    elsewhere = api.workspace(title=unique("Elsewhere"))
    other_source = unique("elsewhere-memo")
    api.upload(b"Redemption gates elsewhere, in another fund entirely.", other_source, "memo.txt", elsewhere["id"])
    api.wait_catalog(elsewhere["id"], 1)

    page = user.page()
    page.goto(f"/workspaces/{ws['id']}")
    page.get_by_label("Search this workspace").fill("redemption gates")
    page.get_by_role("button", name="Search", exact=True).click()
    page.wait_for_url(f"**/workspaces/{ws['id']}/search?q=*")
    conclusions = page.locator("#conclusion-hits")
    expect(conclusions.get_by_role("link", name="Which earlier judgements", exact=False).first).to_be_visible()
    expect(conclusions.locator("mark").first).to_have_text("redemption", ignore_case=True)
    evidence = page.locator("#evidence-hits")
    expect(evidence.get_by_role("link").filter(has_text=fund.source_id).first).to_be_visible()
    expect(evidence.locator("mark").first).to_be_visible()
    expect(page.locator("main")).not_to_contain_text("<<")
    expect(page.locator("main")).not_to_contain_text(other_source)
    audit(page)

    page.goto("/evidence?q=redemption+gates")
    expect(page.locator("#hits mark").first).to_be_visible()
    expect(page.locator("#hits")).not_to_contain_text("<<")
