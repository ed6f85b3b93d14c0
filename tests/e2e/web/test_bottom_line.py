"""A run's page opens on its bottom line (what it concluded, what changed since, how its claims stand) above the
fold, names what changed by title, and every citation of its answer resolves on the run, report and
publication pages, a DOCX locator holding spaces included.

axe-core runs on every page shown here (tests/e2e/web/axe.py), at 1280 px and 390 px.
"""

from __future__ import annotations

import re

from playwright.sync_api import Page, expect

from tests.e2e.web.axe import audit
from tests.e2e.web.conftest import User, fund_x_workspace, unique
from tests.support.api import probe
from tests.support.documents import ANNOUNCEMENT, QUESTION, docx, pdf

DESKTOP = {"width": 1280, "height": 800}
RAW_ID = re.compile(r"\b(?:pub|run|ws|ev|src|art)_[A-Za-z0-9]{6,}")
NEW_ANNOUNCEMENT = [*ANNOUNCEMENT, "Correction, 27 November 2026. Redemption gates are lifted from January."]


def every_citation_resolves(page: Page, region: str) -> int:
    """Each citation link in `region` opens a page that is no error page; how many there were."""
    hrefs = page.locator(f"{region} a.cite").evaluate_all("links => links.map(a => a.getAttribute('href'))")
    for href in dict.fromkeys(hrefs):
        response = page.request.get(href)
        assert response.status == 200, (href, response.status)
    return len(hrefs)


def test_the_bottom_line_comes_first_and_names_what_changed(user: User) -> None:
    api = user.api
    fund = fund_x_workspace(api, "Fund X bottom line")
    ws, a1, source_id = fund.workspace, fund.report, fund.source_id
    run = api.wait_run(api.start_run(ws["id"], QUESTION, history=fund.history)["id"])
    assert run["status"] == "completed"

    page = user.page()
    page.set_viewport_size(DESKTOP)
    page.goto(f"/runs/{run['id']}")
    bottom = page.get_by_role("region", name="Bottom line")
    expect(bottom).to_be_visible()
    box = bottom.bounding_box()
    assert box is not None and box["y"] + box["height"] <= DESKTOP["height"], box
    # The extractive policy's strongest quoted findings, each with the citation it was checked against.
    findings = bottom.locator("#concluded li")
    expect(findings.first).to_be_visible()
    for i in range(findings.count()):
        expect(findings.nth(i).locator("a.cite")).not_to_have_count(0)
    expect(bottom).not_to_contain_text("##")
    expect(bottom.locator("#standing")).to_contain_text(re.compile(r"\d+ supported · \d+ weak · \d+ unsupported"))
    expect(bottom.locator("#unchanged")).to_contain_text("Nothing it cites has changed")
    assert every_citation_resolves(page, "#bottom-line") > 0
    # plan.md names each source it chose as a person knows it, beside the id the run works with.
    expect(page.locator("#live-plan pre")).to_contain_text("— “Report A: Fund X liquidity”")
    expect(page.locator("#live-plan pre")).to_contain_text(f"— “{source_id} v1 page:")
    audit(page)

    # The goal changes, the announcement gets a new version, the report is withdrawn: named by title.
    api.ok(
        "PUT",
        f"/v1/workspaces/{ws['id']}/goal",
        json={"text": "Fund X liquidity, after the gates", "expected_version": 1},
    )
    api.upload(pdf(NEW_ANNOUNCEMENT), source_id, "announcement-v2.pdf")
    api.ok("POST", f"/v1/publications/{a1['id']}/versions/1/withdraw", json={"reason": "superseded"})
    probe(lambda: len(api.ok("GET", f"/v1/workspaces/{ws['id']}/drift")["items"]) >= 2, timeout=60)
    page.goto(f"/runs/{run['id']}")
    banner = bottom.locator("#changed-since")
    expect(banner).to_contain_text("The workspace's goal now has version 2 (this run read version 1)")
    expect(banner.get_by_role("listitem").filter(has_text="Report A: Fund X liquidity v1")).to_contain_text(
        "was withdrawn"
    )
    # A source is named by its title in the catalog the run was offered (here the file's name).
    expect(banner.get_by_role("listitem").filter(has_text="announcement.pdf v1")).to_contain_text("now has version 2")
    assert not RAW_ID.search(banner.inner_text()), banner.inner_text()
    box = bottom.bounding_box()
    assert box is not None and box["y"] < DESKTOP["height"], box
    audit(page)

    # The answer's page says the same, by title.
    page.locator("#publication-link").click()
    banner = page.locator("#changed-since")
    expect(banner).to_contain_text("The workspace's goal now has version 2 (this answer read version 1)")
    expect(banner).to_contain_text("Report A: Fund X liquidity v1 was withdrawn")
    assert not RAW_ID.search(banner.inner_text()), banner.inner_text()

    # The timeline's drift rows and the checkpoint's drift questions name them by title too.
    page.goto(f"/workspaces/{ws['id']}/timeline")
    drifts = page.locator("#timeline .event-drift")
    expect(drifts.filter(has_text="Report A: Fund X liquidity v1")).to_contain_text("was withdrawn")
    for text in drifts.all_inner_texts():
        assert not RAW_ID.search(text), text
    page.goto(f"/workspaces/{ws['id']}")
    questions = page.locator("#open-questions")
    expect(questions).to_contain_text("“Report A: Fund X liquidity” v1")
    assert not RAW_ID.search(questions.inner_text()), questions.inner_text()


def test_every_citation_resolves_a_docx_heading_with_spaces_included(user: User) -> None:
    api = user.api
    ws = api.workspace(title=unique("Committee minutes"))
    source_id = unique("minutes")
    minutes = docx(
        [
            ("h1", "Investment committee"),
            ("p", "The investment committee agreed that Fund X redemption gates hold liquidity at 10 percent."),
            ("h1", "Other business"),
            ("p", "Nothing else was discussed."),
        ]
    )
    api.upload(minutes, source_id, "minutes.docx", ws["id"])
    question = "What did the investment committee agree about Fund X redemption gates and liquidity?"
    run = api.wait_run(api.start_run(ws["id"], question)["id"])
    assert run["status"] == "completed"

    page = user.page()
    page.goto(f"/runs/{run['id']}")
    spaced = re.compile(rf"^{source_id}@v1 docx:h=Investment committee;p=\d+$")
    for region in ("#answer", "#bottom-line"):
        expect(page.locator(region).get_by_role("link", name=spaced).first).to_be_visible()
        assert every_citation_resolves(page, region) > 0
    cite = page.locator("#answer").get_by_role("link", name=spaced).first
    locator = (cite.text_content() or "").split(" ", 1)[1]
    cite.click()
    page.wait_for_url("**/evidence/ev_*")
    expect(page.locator("#locator")).to_have_text(locator)
    expect(page.locator("body")).to_contain_text("redemption gates hold liquidity")

    page.goto(f"/runs/{run['id']}/report")
    expect(page.locator("#report").get_by_role("link", name=spaced).first).to_be_visible()
    assert every_citation_resolves(page, "#report") > 0
    audit(page)

    pub = run["publication"]
    page.goto(f"/publications/{pub['id']}/versions/{pub['version']}")
    expect(page.locator("#pub-body").get_by_role("link", name=spaced).first).to_be_visible()
    assert every_citation_resolves(page, "#pub-body") > 0
    audit(page)


def test_a_run_whose_inputs_changed_is_run_again_on_the_new_evidence(user: User) -> None:
    api = user.api
    fund = fund_x_workspace(api, "Fund X re-run")
    ws, a1 = fund.workspace, fund.report
    first = api.wait_run(api.start_run(ws["id"], QUESTION, history=fund.history)["id"])
    assert first["status"] == "completed"
    page = user.page()
    page.goto(f"/runs/{first['id']}")
    expect(page.locator("#rerun")).to_have_count(0)  # nothing it read has changed

    api.revise(a1["id"], "Fund X liquidity is now weaker: redemptions may take 90 days.", 1)
    probe(lambda: api.ok("GET", f"/v1/workspaces/{ws['id']}/drift")["items"], timeout=60)
    page.goto(f"/runs/{first['id']}")
    expect(page.locator("#changed-since")).to_contain_text("Report A: Fund X liquidity v1")
    audit(page)
    page.get_by_role("button", name="Re-run on the new evidence").click()
    page.wait_for_url(re.compile(r"/runs/run_\w+\?notice="))
    second_id = page.url.split("/runs/", 1)[1].split("?")[0]
    assert second_id != first["id"]
    expect(page.locator(".notice")).to_contain_text("follows the earlier one")
    second = api.wait_run(second_id)
    assert second["status"] == "completed"
    assert second["question"] == QUESTION
    assert second["history"] == [{"publication_id": a1["id"], "version": 2}]

    page.goto(f"/runs/{second_id}")
    expect(page.locator("#follows")).to_have_attribute("href", f"/runs/{first['id']}")
    expect(page.locator("#changed-since")).to_have_count(0)
    page.goto(f"/runs/{first['id']}")
    expect(page.locator("#followed-by")).to_have_attribute("href", f"/runs/{second_id}")
