"""The running example (README), end to end in a real browser, with a screenshot of every page (each
page checked by axe-core at 1280 px and 390 px first)."""

from __future__ import annotations

import re
from pathlib import Path

from playwright.sync_api import Page, expect

from tests.e2e.web.axe import audit
from tests.e2e.web.conftest import User
from tests.support.api import probe
from tests.support.documents import ANNOUNCEMENT, QUESTION, pdf

NEW_ANNOUNCEMENT = [*ANNOUNCEMENT, "Correction, 27 November 2026. Redemption gates are lifted from January."]


# Screenshots are part of the docs: whole pages, cut at this height to keep the files small.
MAX_SHOT_HEIGHT = 1600


def shot(page: Page, screens: Path, name: str) -> None:
    audit(page)
    height = min(int(page.evaluate("document.documentElement.scrollHeight")), MAX_SHOT_HEIGHT)
    width = page.viewport_size["width"] if page.viewport_size else 1100
    clip = {"x": 0, "y": 0, "width": width, "height": height}
    page.screenshot(path=str(screens / f"{name}.png"), full_page=True, clip=clip)


def test_running_example_in_the_browser(user: User, screens: Path, tmp_path: Path) -> None:
    page = user.page()
    page.goto("/workspaces")
    page.get_by_label("Title").fill("Fund X")
    page.get_by_label("Goal").fill("Assess the liquidity risk of Fund X")
    page.get_by_role("button", name="Create workspace").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Fund X")
    workspace_url = page.url.split("?")[0]

    # Week 1: report A (v1), later revised (v2). Week 2: report B.
    page.get_by_label("Title").fill("Report A: Fund X liquidity")
    page.get_by_label("Body").fill("Fund X can meet redemptions within 30 days.\nIts liquidity is adequate.")
    page.get_by_role("button", name="Publish").click()
    expect(page.locator("#pub-status")).to_have_text("active")
    a_id = re.search(r"/publications/(pub_\w+)/versions/1", page.url).group(1)  # type: ignore[union-attr]
    page.get_by_label("New body").fill("Fund X liquidity is now weaker.\nRedemptions may take 90 days.")
    page.get_by_role("button", name="Save as v2").click()
    expect(page).to_have_url(re.compile(r"/versions/2\?"))
    page.get_by_label("From").select_option("1")
    page.get_by_label("To").select_option("2")
    page.get_by_role("button", name="Compare").click()
    expect(page.locator("td.removed").first).to_contain_text("Fund X can meet redemptions within 30 days.")
    expect(page.locator("td.added").first).to_contain_text("Fund X liquidity is now weaker.")
    shot(page, screens, "07-diff")

    page.goto(workspace_url)
    page.get_by_label("Title").fill("Report B: Fund X disagrees")
    page.get_by_label("Body").fill("Report B finds Fund X redemption liquidity inadequate under stress.")
    page.get_by_role("button", name="Publish").click()
    expect(page.locator("#pub-status")).to_have_text("active")

    # Week 4: the announcement arrives, uploaded with a progress bar.
    announcement = tmp_path / "announcement.pdf"
    announcement.write_bytes(pdf(ANNOUNCEMENT))
    page.goto(workspace_url)
    page.get_by_label("Source id").fill("announcement")
    page.get_by_label("File").set_input_files(str(announcement))
    page.get_by_role("button", name="Upload").click()
    page.wait_for_url("**/sources/announcement?notice=*")
    expect(page.locator("#active-version")).to_have_text("v1")
    expect(page.locator("#source-versions")).to_contain_text("complete: 2 of 2 units")
    shot(page, screens, "04-source")

    # Ask with A@1 picked although A@2 exists.
    page.goto(workspace_url)
    expect(page.locator("#catalog-bound")).to_be_visible()
    page.get_by_label("Question").fill(QUESTION)
    page.get_by_label("Report A: Fund X liquidity v1").check()
    page.get_by_label("Report B: Fund X disagrees v1").check()
    shot(page, screens, "03-workspace")
    page.get_by_role("button", name="Start run").click()
    page.wait_for_url("**/runs/run_*")
    run_url = page.url
    expect(page.locator("#run-status")).to_have_text(re.compile("admitted|running|completed"))
    shot(page, screens, "05-run-live")

    # The page refreshes itself until the run is done.
    expect(page.locator("#run-status")).to_have_text("completed", timeout=90_000)
    ledger = page.locator("#ledger")
    for stage in ("listed", "read", "included"):
        expect(ledger).to_contain_text(stage)
    read = ledger.locator("tr.stage-read")
    expect(read.filter(has_text=f"{a_id}@v1")).to_have_count(1)
    expect(read.filter(has_text=f"{a_id}@v2")).to_have_count(0)  # listed (the catalog's latest), never read
    expect(read.filter(has_text="announcement@v1").first).to_contain_text(re.compile(r"page:\d+"))
    expect(page.locator("#files")).to_contain_text("plan.md")
    expect(page.locator("#report-link")).to_be_visible()
    shot(page, screens, "05-run-completed")

    page.locator("#publication-link").click()
    expect(page.locator("#pub-status")).to_have_text("active")
    expect(page.locator("#pub-body")).to_contain_text("What earlier reports concluded")
    expect(page.locator("#pub-body")).to_contain_text(f"{a_id}@1")
    sources = page.locator("#sources")
    expect(sources.get_by_role("link", name=f"{a_id}@v1")).to_be_visible()
    claims = page.locator("#claims")
    expect(claims.locator("tr.support-supported").filter(has_text=f"{a_id}@v1")).to_have_count(1)
    expect(claims.locator("tr.support-unsupported")).to_have_count(0)
    shot(page, screens, "06-publication")

    # Follow a source of the answer to the passage it cites, at its exact version.
    sources.get_by_role("link", name=re.compile(r"^page:\d+$")).first.click()
    page.wait_for_url("**/evidence/ev_*")
    expect(page.locator("#evidence-version")).to_have_text("v1")
    expect(page.locator("#locator")).to_have_text(re.compile(r"^page:\d+$"))
    expect(page.locator("#passage")).to_contain_text(re.compile("redemption|Redemptions|Daily"))
    shot(page, screens, "08-evidence")

    page.goto(run_url)
    page.locator("#report-link").click()
    expect(page.locator("#report")).to_contain_text("What earlier reports concluded")
    shot(page, screens, "08b-report")

    # Week 5: the announcement's correction arrives. The first run's answer now says it is out of date.
    page.goto("/sources/announcement")
    corrected = tmp_path / "announcement-v2.pdf"
    corrected.write_bytes(pdf(NEW_ANNOUNCEMENT))
    page.get_by_label("File").set_input_files(str(corrected))
    page.get_by_role("button", name="Upload").click()
    page.wait_for_url("**/sources/announcement?notice=*")
    expect(page.locator("#active-version")).to_have_text("v2")
    workspace_id = workspace_url.rsplit("/", 1)[1]
    probe(lambda: user.api.ok("GET", f"/v1/workspaces/{workspace_id}/drift")["items"], timeout=60)
    page.goto(run_url)
    expect(page.locator("#changed-since")).to_contain_text("now has version 2")
    shot(page, screens, "11-run-changed")

    # Asked again, the run reads v2; the two answers side by side, and the workspace's timeline.
    page.goto(workspace_url)
    page.get_by_label("Question").fill(QUESTION)
    page.get_by_label("Report A: Fund X liquidity v1").check()
    page.get_by_role("button", name="Start run").click()
    page.wait_for_url("**/runs/run_*")
    expect(page.locator("#run-status")).to_have_text("completed", timeout=90_000)
    page.goto(workspace_url)
    page.get_by_role("button", name="Compare answers").click()
    expect(page.locator("td.added").filter(has_text="announcement@v2").first).to_be_visible()
    expect(page.get_by_role("region", name="Claim by claim")).to_be_visible()
    shot(page, screens, "12-compare-runs")

    # The first run as it opens (its bottom line above the fold) and the workspace, on a desktop and a phone.
    for width, height in ((1280, 800), (390, 844)):
        page.set_viewport_size({"width": width, "height": height})
        page.goto(run_url)
        expect(page.get_by_role("region", name="Bottom line")).to_be_visible()
        audit(page)
        page.screenshot(path=str(screens / f"15-run-bottom-line-{width}.png"))
        page.goto(workspace_url)
        expect(page.get_by_role("region", name="Where things stand")).to_be_visible()
        shot(page, screens, f"16-workspace-{width}")
    page.set_viewport_size({"width": 1100, "height": 800})
    page.goto(workspace_url)
    page.locator("#timeline-link").click()
    expect(page.locator("#timeline .event-drift")).to_have_count(1)
    shot(page, screens, "13-timeline")
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(run_url)
    shot(page, screens, "14-run-phone")
    page.set_viewport_size({"width": 1100, "height": 800})

    page.goto("/evidence?q=redemption+gates")
    expect(page.locator("#hits")).to_contain_text("announcement@v2")
    shot(page, screens, "09-search")
    page.goto("/import")
    shot(page, screens, "10-import")
    page.goto("/workspaces")
    expect(page.get_by_role("link", name="Fund X")).to_be_visible()
    shot(page, screens, "02-workspaces")


def test_sign_in_page_screenshot(anonymous: Page, screens: Path) -> None:
    anonymous.goto("/")
    expect(anonymous.get_by_role("button", name="Sign in")).to_be_visible()
    shot(anonymous, screens, "01-signin")
