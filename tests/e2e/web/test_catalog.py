"""Every catalog item is reachable in the workbench: the catalog is paged and filtered by kind, and the
history picker filters by title and pages, keeping the question and the versions already ticked.

axe-core runs on every page shown here (tests/e2e/web/axe.py), at 1280 px and 390 px.
"""

from __future__ import annotations

from playwright.sync_api import expect

from tests.e2e.web.axe import audit
from tests.e2e.web.conftest import User, unique

NOTES = 56


def test_the_catalog_and_the_history_picker_page_and_filter(user: User) -> None:
    api = user.api
    ws = api.workspace(title=unique("Many items"))
    a1 = api.publish("Report A: Fund X liquidity", "Fund X can meet redemptions within 30 days.", ws["id"])
    for n in range(NOTES):
        api.publish(f"Note {n:02d} on Fund X", f"Observation {n}.", ws["id"])
    api.upload(b"A memo about redemption gates.", unique("memo"), "memo.txt", ws["id"])
    total = NOTES + 2
    api.wait_catalog(ws["id"], total)

    page = user.page()
    page.goto(f"/workspaces/{ws['id']}")
    bound = page.locator("#catalog-bound")
    expect(bound).to_have_text(f"Items 1–50 of {total}.")
    expect(page.locator("#catalog tbody tr")).to_have_count(50)
    expect(page.locator("#history-count")).to_contain_text(f"Publications 1–10 of {NOTES + 1}")
    audit(page)

    # The catalog is folded under its count; opened, it pages on.
    page.get_by_text("Show the catalog").click()
    page.get_by_role("link", name="Next page").click()
    expect(bound).to_have_text(f"Items 51–{total} of {total}.")
    expect(page.locator("#catalog").get_by_role("link", name="Report A: Fund X liquidity")).to_be_visible()
    page.get_by_label("Kind").select_option("source")
    page.get_by_role("button", name="Show").click()
    expect(bound).to_have_text("Items 1–1 of 1.")
    expect(page.locator("#catalog tbody tr")).to_have_count(1)
    expect(page.locator("#catalog tbody tr td").first).to_have_text("source")

    # The history picker: filtered by title, the question typed and the tick carried across its pages.
    page.goto(f"/workspaces/{ws['id']}")
    question = "Does Report A still hold?"
    page.get_by_label("Question").fill(question)
    page.get_by_label("Find publications").fill("report a")
    page.get_by_role("button", name="Filter").click()
    expect(page.locator("#history-count")).to_contain_text("Publications 1–1 of 1")
    expect(page.get_by_label("Question")).to_have_value(question)
    page.get_by_label("Report A: Fund X liquidity v1").check()
    audit(page)

    page.get_by_label("Find publications").fill("")
    page.get_by_role("button", name="Filter").click()
    expect(page.locator("#history-count")).to_contain_text(f"Publications 1–10 of {NOTES + 1}")
    carried = page.get_by_label("Report A: Fund X liquidity v1 (picked on another page)")
    expect(carried).to_be_checked()
    page.get_by_role("button", name="More publications").click()
    expect(page.locator("#history-count")).to_contain_text(f"Publications 11–20 of {NOTES + 1}")
    expect(carried).to_be_checked()
    expect(page.get_by_label("Question")).to_have_value(question)
    page.get_by_role("button", name="Start run").click()
    page.wait_for_url("**/runs/run_*")
    run_id = page.url.rsplit("/", 1)[1].split("?")[0]
    assert api.run(run_id)["history"] == [{"publication_id": a1["id"], "version": 1}]
