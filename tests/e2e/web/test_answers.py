"""Answers read as documents: markdown rendered safely, every citation a link to the exact passage or
publication version, the policy's nature said, and the HTML report styled with a way back.

axe-core runs on every page shown here (tests/e2e/web/axe.py), at 1280 px and 390 px.
"""

from __future__ import annotations

import re

from playwright.sync_api import expect

from tests.e2e.web.axe import audit
from tests.e2e.web.conftest import User, fund_x_workspace, unique
from tests.support.documents import QUESTION


def test_an_answer_is_rendered_markdown_with_linked_citations(user: User) -> None:
    api = user.api
    fund = fund_x_workspace(api, "Fund X answers")
    ws, a1, source_id = fund.workspace, fund.report, fund.source_id
    run = api.start_run(ws["id"], QUESTION, history=fund.history)
    assert api.wait_run(run["id"])["status"] == "completed"

    page = user.page()
    page.goto(f"/runs/{run['id']}")
    answer = page.locator("#answer")
    expect(answer.get_by_role("heading", name="What earlier reports concluded")).to_be_visible()
    expect(answer.locator("strong").filter(has_text="Report A: Fund X liquidity")).to_have_count(1)
    expect(answer).not_to_contain_text("##")
    expect(answer).not_to_contain_text("**")
    expect(page.locator("#policy-nature")).to_contain_text("does not weigh them or draw a conclusion")
    audit(page)

    # The publication cited as `id@1` links to that exact version.
    answer.get_by_role("link", name=f"{a1['id']}@1").click()
    page.wait_for_url(f"**/publications/{a1['id']}/versions/1")
    expect(page.locator("#pub-body")).to_contain_text("Fund X can meet redemptions within 30 days.")

    # The passage cited as `source@v1 page:N` links to that passage at that version.
    page.goto(f"/runs/{run['id']}")
    cite = answer.get_by_role("link", name=re.compile(rf"^{source_id}@v1 page:\d+$")).first
    locator = (cite.text_content() or "").split(" ", 1)[1]
    cite.click()
    page.wait_for_url("**/evidence/ev_*")
    expect(page.locator("#evidence-version")).to_have_text("v1")
    expect(page.locator("#locator")).to_have_text(locator)
    audit(page)

    # The publication page renders the same body with the same links.
    page.goto(f"/runs/{run['id']}")
    page.locator("#publication-link").click()
    body = page.locator("#pub-body")
    expect(body.get_by_role("heading", name="What the new evidence says")).to_be_visible()
    expect(body.get_by_role("link", name=re.compile(rf"^{source_id}@v1 page:\d+$")).first).to_be_visible()
    audit(page)

    # The report, read in the workbench: rendered, linked, with a way back to the run.
    page.goto(f"/runs/{run['id']}")
    page.locator("#report-link").click()
    report = page.locator("#report")
    expect(report.get_by_role("heading", name="What earlier reports concluded")).to_be_visible()
    expect(report.get_by_role("link", name=f"{a1['id']}@1")).to_be_visible()
    audit(page)
    page.locator("#back-to-run").click()
    page.wait_for_url(f"**/runs/{run['id']}")

    # The retained HTML file: styled, its citations linked, a link back to the run.
    page.locator("#report-file").click()
    expect(page.get_by_role("heading", name="What earlier reports concluded")).to_be_visible()
    expect(page.get_by_role("link", name=f"{a1['id']}@1")).to_have_attribute(
        "href", f"/publications/{a1['id']}/versions/1"
    )
    expect(page.get_by_role("link", name="Back to the run in the workbench")).to_have_attribute(
        "href", f"/runs/{run['id']}"
    )
    assert page.evaluate("getComputedStyle(document.body).maxWidth") != "none"
    # The file is served in a CSP sandbox where no script runs, axe's timers included: axe reads a copy.
    copy = user.page()
    copy.set_content(page.content())
    audit(copy)


def test_markup_in_a_document_is_shown_as_text(user: User) -> None:
    hostile = (
        "**Bold** and <script>document.title='owned'</script> and <img src=x onerror=\"document.title='owned'\">\n\n"
        "[a link](javascript:document.title='owned') ![an image](https://example.com/x.png) `<b>code</b>`"
    )
    pub = user.api.publish(unique("Hostile report"), hostile)
    page = user.page()
    page.goto(f"/publications/{pub['id']}/versions/1")
    body = page.locator("#pub-body")
    expect(body.locator("strong")).to_have_text("Bold")
    expect(body).to_contain_text("<script>document.title='owned'</script>")
    expect(body).to_contain_text("<b>code</b>")
    expect(body.locator("script, img, b")).to_have_count(0)
    expect(body.locator("a[href^='javascript']")).to_have_count(0)
    assert page.title() != "owned"
    audit(page)
