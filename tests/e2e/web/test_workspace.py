"""A workspace's page answers "where are we?": the goal once (edited behind a fold), the checkpoint and its open
questions, the latest conclusions with their standing, what changed since the last run; then the runs, the
catalog (in the order it says) and the goal's history, each folded. Nothing is wider than a phone, two long questions
to compare included, and the history picker's boxes are big enough to tap.

axe-core runs on every page shown here (tests/e2e/web/axe.py), at 1280 px and 390 px.
"""

from __future__ import annotations

from playwright.sync_api import expect

from tests.e2e.web.axe import audit
from tests.e2e.web.conftest import User, fund_x_workspace
from tests.support.api import probe
from tests.support.documents import ANNOUNCEMENT, QUESTION, pdf

PHONE = {"width": 390, "height": 844}
LONG = (
    " Consider the redemption gates, the suspension of daily redemptions, the sale of the illiquid real estate"
    " holdings, and whether the earlier judgements on a thirty-day horizon can still be relied upon by the committee."
)


def test_the_workspace_page_says_where_things_stand(user: User) -> None:
    api = user.api
    fund = fund_x_workspace(api, "Fund X where are we")
    ws = fund.workspace
    first = api.wait_run(api.start_run(ws["id"], QUESTION + LONG, history=fund.history)["id"])
    second = api.wait_run(api.start_run(ws["id"], "Is Fund X still liquid?" + LONG, history=fund.history)["id"])
    assert first["status"] == second["status"] == "completed"
    api.upload(pdf([*ANNOUNCEMENT, "Correction: the gates are lifted."]), fund.source_id, "announcement-v2.pdf")
    # The page is rendered once: wait for the workspace to record the change first.
    probe(lambda: api.ok("GET", f"/v1/workspaces/{ws['id']}/drift")["items"], timeout=60)

    page = user.page()
    page.goto(f"/workspaces/{ws['id']}")
    # The goal once; its form is behind "Edit the goal".
    expect(page.get_by_text("Assess the liquidity risk of Fund X", exact=True).locator("visible=true")).to_have_count(1)
    expect(page.locator("#goal-text")).to_be_visible()
    expect(page.get_by_label("Goal", exact=True)).to_be_hidden()
    page.get_by_text("Edit the goal").click()
    expect(page.get_by_label("Goal", exact=True)).to_be_visible()

    where = page.get_by_role("region", name="Where things stand")
    expect(where).to_be_visible()
    latest = where.locator("#latest")
    expect(latest.get_by_role("link", name="Is Fund X still liquid?", exact=False)).to_be_visible()
    expect(latest.locator("a.cite").first).to_be_visible()
    expect(latest.locator("#latest-standing")).to_contain_text("supported")
    expect(where).to_contain_text("Checkpoint")
    # The announcement's new version is a change since the last run.
    expect(where.locator("#changed-since")).to_contain_text("now has version 2")

    # Runs, catalog and goal history fold; the catalog says the order it is in (the API's: the analyst's own
    # material first, each part newest to join first), not "newest first" while a revised report sits below.
    expect(page.locator("#runs-details")).to_have_attribute("open", "")
    expect(page.locator("#catalog-details")).not_to_have_attribute("open", "")
    page.get_by_text("Show the catalog").click()
    expect(page.locator("#catalog caption")).to_contain_text("the analyst's own first, then runs' answers")
    expect(page.locator("#catalog caption")).to_contain_text("a new version keeps its publication's place")
    kinds = page.locator("#catalog tbody tr td:nth-child(1)").all_inner_texts()
    assert len(kinds) >= 3, kinds

    # Two long questions to compare: the options are cut, the page fits a phone.
    for select in ("#compare-from", "#compare-to"):
        for text in page.locator(f"{select} option").all_inner_texts():
            assert len(text) <= 50, text
    box = page.locator("#history input[type=checkbox]").first.bounding_box()
    assert box is not None and box["height"] >= 24 and box["width"] >= 24, box
    audit(page)
    page.set_viewport_size(PHONE)
    page.reload()
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
