"""The workbench on a phone (390 px: no page wider than the screen, tables scroll in their box instead of
wrapping per character), its icon, Archive asking first, and a source page with its text and its original.

axe-core runs on every page shown here (tests/e2e/web/axe.py), at 1280 px and 390 px; it also checks that
no page is wider than the screen at either width.
"""

from __future__ import annotations

from playwright.sync_api import Page, expect

from tests.e2e.web.axe import audit
from tests.e2e.web.conftest import User, unique
from tests.support.documents import ANNOUNCEMENT, pdf

PHONE = {"width": 390, "height": 844}

# Table cells laid out narrower than a few characters are wrapping per character.
NARROW_CELLS = """() => Array.from(document.querySelectorAll('td, th'))
  .filter(c => c.textContent.trim().length > 3 && c.getBoundingClientRect().width < 30)
  .map(c => c.textContent.trim())"""


def on_a_phone(page: Page) -> None:
    audit(page)
    page.set_viewport_size(PHONE)
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"], page.url
    assert page.evaluate(NARROW_CELLS) == [], page.url


def test_pages_fit_a_phone(user: User) -> None:
    api = user.api
    ws = api.workspace(title=unique("A workspace with a rather long title for a small screen"))
    pub = api.publish("Report A: Fund X liquidity", "Fund X can meet redemptions within 30 days.", ws["id"])
    api.revise(pub["id"], "Fund X liquidity is now weaker.", 1)
    source_id = unique("a-source-with-a-long-name-announcement-2026-11-20")
    api.upload(b"Daily redemptions are suspended until the holdings are sold.", source_id, "memo.txt", ws["id"])
    page = user.page()
    page.set_viewport_size(PHONE)
    for path in (
        "/workspaces",
        f"/workspaces/{ws['id']}",
        f"/publications/{pub['id']}/versions/2",
        f"/publications/{pub['id']}/diff?from=1&to=2",
        f"/sources/{source_id}",
        "/evidence?q=redemptions",
        "/import",
    ):
        page.goto(path)
        on_a_phone(page)


def test_archive_asks_first_and_the_icon_exists(user: User) -> None:
    ws = user.api.workspace(title=unique("To archive"))
    page = user.page()
    icon = page.request.get(f"{user.url}/favicon.ico")
    assert icon.status == 200 and icon.headers["content-type"].startswith("image/svg+xml")

    page.goto(f"/workspaces/{ws['id']}")
    page.get_by_role("link", name="Archive…").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("Archive the workspace")
    audit(page)
    page.get_by_role("link", name="Keep it active").click()
    assert user.api.ok("GET", f"/v1/workspaces/{ws['id']}")["status"] == "active"
    page.get_by_role("link", name="Archive…").click()
    page.get_by_role("button", name="Archive workspace").click()
    expect(page.locator(".notice")).to_contain_text("archived")
    assert user.api.ok("GET", f"/v1/workspaces/{ws['id']}")["status"] == "archived"


def test_a_source_page_shows_its_text_per_locator_and_offers_the_original(user: User) -> None:
    source_id = unique("announcement")
    original = pdf(ANNOUNCEMENT)
    user.api.upload(original, source_id, "announcement.pdf")
    page = user.page()
    page.goto(f"/sources/{source_id}")
    passages = page.locator("#passages")
    expect(passages.get_by_role("link", name="page:1")).to_be_visible()
    expect(passages).to_contain_text("redemption gates of 10 percent per quarter")
    expect(passages.get_by_role("link", name="page:2")).to_be_visible()
    expect(passages).to_contain_text("Daily redemptions are suspended")
    audit(page)
    with page.expect_download() as info:
        page.get_by_role("link", name="Download v1").click()
    download = info.value
    assert download.suggested_filename == "announcement.pdf"
    with open(download.path(), "rb") as saved:
        assert saved.read() == original
    passages.get_by_role("link", name="page:2").click()
    page.wait_for_url("**/evidence/ev_*")
    expect(page.locator("#locator")).to_have_text("page:2")
    # A retired source offers neither its text nor its original.
    user.api.ok("POST", f"/v1/sources/{source_id}/retire")
    page.goto(f"/sources/{source_id}?version=1")
    expect(page.locator("#text-h + .error")).to_contain_text("retired")
    expect(page.get_by_role("link", name="Download v1")).to_have_count(0)
    response = page.request.get(f"{user.url}/sources/{source_id}/versions/1/original")
    assert response.status == 409 and b"%PDF" not in response.body()
