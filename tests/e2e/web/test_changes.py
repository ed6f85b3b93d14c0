"""What changed since a run: a banner on runs and answers whose cited sources have a newer version or were
withdrawn (from the workspace's drift records), the conclusions that rest on changed evidence (the answer's
stale claims) on the run, the answer and the timeline, and the diff of two runs' answers.

axe-core runs on every page shown here (tests/e2e/web/axe.py), at 1280 px and 390 px.
"""

from __future__ import annotations

from playwright.sync_api import expect

from tests.e2e.web.axe import audit
from tests.e2e.web.conftest import User, fund_x_workspace
from tests.support.api import probe
from tests.support.documents import ANNOUNCEMENT, QUESTION, pdf

NEW_ANNOUNCEMENT = [*ANNOUNCEMENT, "Correction, 27 November 2026. Redemption gates are lifted from January."]


def test_a_run_whose_sources_changed_says_so_and_the_timeline_and_diff_show_it(user: User) -> None:
    api = user.api
    fund = fund_x_workspace(api, "Fund X changes")
    ws, a1, source_id, history = fund.workspace, fund.report, fund.source_id, fund.history
    first = api.wait_run(api.start_run(ws["id"], QUESTION, history=history)["id"])
    assert first["status"] == "completed"

    page = user.page()
    page.goto(f"/runs/{first['id']}")
    expect(page.locator("#changed-since")).to_have_count(0)
    expect(page.locator("#stale-claims")).to_have_count(0)

    # The announcement's next version arrives: the first run's answer cites v1.
    assert api.upload(pdf(NEW_ANNOUNCEMENT), source_id, "announcement-v2.pdf")["version"] == 2
    probe(lambda: api.ok("GET", f"/v1/workspaces/{ws['id']}/drift")["items"], timeout=60)
    pub = first["publication"]
    claims_path = f"/v1/publications/{pub['id']}/versions/{pub['version']}/claims"
    probe(lambda: any(c["stale"] for c in api.ok("GET", claims_path)["items"]), timeout=60)
    page.goto(f"/runs/{first['id']}")
    banner = page.locator("#changed-since")
    expect(banner).to_contain_text("Changed since this run")
    expect(banner.get_by_role("listitem").filter(has_text="announcement.pdf v1")).to_contain_text("now has version 2")
    # The conclusions that cite version 1, each checked again against version 2.
    stale = page.locator("#stale-claims")
    expect(stale).to_contain_text("Conclusions resting on changed evidence")
    expect(stale.get_by_role("listitem").first).to_contain_text(f"{source_id}@v1 has a newer version, {source_id}@v2")
    expect(stale.get_by_role("listitem").first).to_contain_text("checked against it, the claim is")
    audit(page)
    page.locator("#publication-link").click()
    expect(page.locator("#changed-since")).to_contain_text("now has version 2")
    expect(page.locator("#stale-claims")).to_be_visible()
    expect(page.locator("#claims tbody tr").filter(has_text="has a newer version").first).to_be_visible()
    audit(page)

    # A second run reads v2: its answer has nothing newer to warn about; the two answers can be compared.
    second = api.wait_run(api.start_run(ws["id"], QUESTION, history=history)["id"])
    assert second["status"] == "completed"
    page.goto(f"/runs/{second['id']}")
    expect(page.locator("#run-status")).to_have_text("completed")
    expect(page.locator("#changed-since")).to_have_count(0)
    expect(page.locator("#stale-claims")).to_have_count(0)

    # Withdrawing the report the first answer cites is a change too.
    api.ok("POST", f"/v1/publications/{a1['id']}/versions/1/withdraw", json={"reason": "superseded"})
    probe(lambda: len(api.ok("GET", f"/v1/workspaces/{ws['id']}/drift")["items"]) >= 2, timeout=60)
    page.goto(f"/runs/{first['id']}")
    # Named by its title, not its id.
    withdrawn = page.locator("#changed-since").get_by_role("listitem").filter(has_text=a1["title"])
    expect(withdrawn).to_contain_text("was withdrawn")
    expect(withdrawn).not_to_contain_text(a1["id"])

    page.goto(f"/workspaces/{ws['id']}")
    page.get_by_label("Compare the answer of").select_option(first["id"])
    page.get_by_label("with", exact=True).select_option(second["id"])
    page.get_by_role("button", name="Compare answers").click()
    page.wait_for_url("**/runs/compare?*")
    expect(page.locator("td.added").filter(has_text=f"{source_id}@v2").first).to_be_visible()
    expect(page.locator("td.removed").filter(has_text=f"{source_id}@v1").first).to_be_visible()
    # Claim by claim: the first answer's claims on v1 were stale, the second's on v2 stand; the sources moved on.
    claims = page.get_by_role("region", name="Claim by claim")
    expect(claims.locator("#changed-claims li").filter(has_text="was stale").first).to_be_visible()
    expect(claims.locator("#source-changes .added-source")).to_contain_text("announcement-v2.pdf v2")
    expect(claims.locator("#source-changes .dropped-source")).to_contain_text("announcement.pdf v1")
    expect(page.locator("#old-run")).to_have_attribute("href", f"/runs/{first['id']}")
    expect(page.locator("#new-run")).to_have_attribute("href", f"/runs/{second['id']}")
    audit(page)

    page.goto(f"/workspaces/{ws['id']}")
    page.locator("#timeline-link").click()
    timeline = page.locator("#timeline")
    expect(timeline.locator(".event-goal")).to_have_count(1)
    expect(timeline.locator(".event-run")).to_have_count(2)
    expect(timeline.locator(".event-source")).to_have_count(2)
    expect(timeline.locator(".event-drift")).to_have_count(2)
    expect(timeline.locator(".event-publication").filter(has_text="Report A: Fund X liquidity v1")).to_contain_text(
        "withdrawn"
    )
    # Drift rows name what changed and what cites it by title, never by id.
    expect(timeline.locator(".event-drift").filter(has_text="announcement.pdf")).to_contain_text(
        "has a new version, v2"
    )
    expect(timeline.locator(".event-drift").filter(has_text="Report A: Fund X liquidity v1")).to_contain_text(
        "was withdrawn"
    )
    for row in timeline.locator(".event-drift").all_inner_texts():
        assert "pub_" not in row, row
    # Both runs' conclusions rest on changed evidence: the first's on the announcement's v1 and on the withdrawn
    # report, the second's on the withdrawn report.
    runs = timeline.locator(".event-run")
    for run in (first, second):
        shown = runs.filter(has=page.locator(f"a[href='/runs/{run['id']}']"))
        expect(shown.locator("a.stale")).to_contain_text("on changed evidence")
    audit(page)
