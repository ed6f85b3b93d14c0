"""The ledger reads as a record: titles instead of ids, the whole run's stage totals on every page, columns
that do not break words; breadcrumbs name the workspace and the run; answers are titled by their question.

axe-core runs on every page shown here (tests/e2e/web/axe.py), at 1280 px and 390 px.
"""

from __future__ import annotations

import re
from collections import Counter

from playwright.sync_api import Page, expect

from tests.e2e.web.axe import audit
from tests.e2e.web.conftest import User, fund_x_workspace
from tests.support.documents import QUESTION

STAGES = ("listed", "read", "included", "unavailable", "replayed")

# Each short cell (row number, stage) is laid out on one line: no word is broken across lines.
ONE_LINE = """() => Array.from(document.querySelectorAll('#ledger td:nth-child(1), #ledger td:nth-child(2)'))
  .filter(td => { const r = document.createRange(); r.selectNodeContents(td); return r.getClientRects().length > 1; })
  .map(td => td.textContent)"""


def cells_on_one_line(page: Page) -> None:
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 900})
        assert page.evaluate(ONE_LINE) == [], width


def test_the_ledger_names_materials_and_counts_the_whole_run(user: User) -> None:
    api = user.api
    fund = fund_x_workspace(api, "Fund X ledger")
    ws, a1, title = fund.workspace, fund.report, fund.workspace["title"]
    run = api.start_run(ws["id"], QUESTION, history=fund.history)
    assert api.wait_run(run["id"])["status"] == "completed"
    rows = api.ledger(run["id"])
    counts = Counter(row["stage"] for row in rows)
    # Whichever page is asked for, the totals are the whole run's.
    one = api.ok("GET", f"/v1/runs/{run['id']}/ledger", params={"limit": 1})
    assert one["next_cursor"] and {k: v for k, v in one["totals"].items() if v} == dict(counts)

    page = user.page()
    page.goto(f"/runs/{run['id']}")
    totals = page.locator("#ledger-totals")
    for stage in STAGES:
        expect(totals).to_contain_text(f"{counts.get(stage, 0)} {stage}")
    crumbs = page.get_by_role("navigation", name="Breadcrumbs")
    expect(crumbs.get_by_role("link", name=title)).to_have_attribute("href", f"/workspaces/{ws['id']}")
    ledger = page.locator("#ledger")
    read_a = ledger.locator("tr.stage-read").filter(has_text=f"{a1['id']}@v1")
    expect(read_a.get_by_role("link", name="Report A: Fund X liquidity")).to_be_visible()
    expect(ledger).not_to_contain_text(f"{run['id']}:r")
    cells_on_one_line(page)
    audit(page)

    # The answer is titled by its question, its page leads back to the run and the workspace by name.
    page.set_viewport_size({"width": 1280, "height": 900})
    page.locator("#publication-link").click()
    expect(page.get_by_role("heading", level=1)).to_have_text(QUESTION)
    crumbs = page.get_by_role("navigation", name="Breadcrumbs")
    expect(crumbs.get_by_role("link", name=title)).to_be_visible()
    expect(crumbs.get_by_role("link", name="Run: Which earlier judgements")).to_have_attribute(
        "href", f"/runs/{run['id']}"
    )
    audit(page)

    page.goto(f"/runs/{run['id']}")
    page.locator("#files").get_by_role("link", name="plan.md").click()
    crumbs = page.get_by_role("navigation", name="Breadcrumbs")
    expect(crumbs.get_by_role("link", name=title)).to_be_visible()
    expect(crumbs.get_by_role("link", name="Run: Which earlier judgements")).to_be_visible()
    audit(page)


def test_the_ledger_filters_by_stage_and_opens_a_step(user: User) -> None:
    api = user.api
    fund = fund_x_workspace(api, "Fund X steps")
    run = api.wait_run(api.start_run(fund.workspace["id"], QUESTION, history=fund.history)["id"])
    assert run["status"] == "completed"
    rows = api.ledger(run["id"])
    counts = Counter(row["stage"] for row in rows)

    page = user.page()
    page.goto(f"/runs/{run['id']}")
    # The totals say what each stage counts.
    totals = page.locator("#ledger-totals")
    expect(totals).to_contain_text(f"{counts['included']} included: passages placed into model requests")
    expect(totals).to_contain_text(f"{counts['read']} read: passages the run fetched")

    page.locator("#ledger-stages").get_by_role("link", name="read", exact=True).click()
    page.wait_for_url("**?stage=read*")
    expect(page.locator("#ledger tbody tr")).to_have_count(counts["read"])
    expect(page.locator("#ledger tbody tr.stage-read")).to_have_count(counts["read"])
    audit(page)

    # A model request opened: what the ledger says went into it.
    page.locator("#ledger-stages").get_by_role("link", name="included", exact=True).click()
    step = page.locator("#ledger").get_by_role("link", name=re.compile(r"^model request ")).first
    name = (step.text_content() or "").removeprefix("model request ")
    step.click()
    page.wait_for_url(f"**/runs/{run['id']}/steps/*")
    expect(page.get_by_role("heading", level=1)).to_have_text(f"Model request {name}")
    included = [r for r in rows if r["stage"] == "included" and r["model_request"] in (name, f"{run['id']}:{name}")]
    expect(page.locator("#step tbody tr")).to_have_count(len(included))
    expect(page.locator("#step")).to_contain_text("Report A: Fund X liquidity")
    audit(page)
    page.locator("#back-to-run").click()
    page.wait_for_url(f"**/runs/{run['id']}")
