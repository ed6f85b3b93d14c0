"""Sign-in and sign-out, the session cookie, CSRF refusal, the strict CSP, markup shown as text, scopes."""

from __future__ import annotations

import re

from playwright.sync_api import Browser, Page, expect

from tests.e2e.web.conftest import User, new_context, sign_in, unique
from tests.support.api import Api
from tests.support.stack import RunningStack


def test_sign_in_sets_a_strict_http_only_cookie_and_sign_out_ends_it(
    anonymous: Page, stack: RunningStack, user: User
) -> None:
    page = anonymous
    page.goto("/workspaces")
    page.wait_for_url("**/signin?next=*")
    page.get_by_label("Token").fill("dsk_" + "x" * 40)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_contain_text("not known")
    page.get_by_label("Token").fill(stack.admin_token)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_contain_text("admin token")

    page.get_by_label("Token").fill(user.token)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url("**/workspaces")
    cookie = next(c for c in page.context.cookies() if c["name"] == "dossier_session")
    assert cookie["httpOnly"] is True
    assert cookie["sameSite"] == "Strict"
    assert cookie["secure"] is False, "served over plain http here, so the cookie cannot be Secure"
    assert page.evaluate("document.cookie") == "", "the session must not be readable by scripts"

    page.get_by_role("button", name="Sign out").click()
    page.wait_for_url("**/signin*")
    assert not [c for c in page.context.cookies() if c["name"] == "dossier_session"]
    page.goto("/workspaces")
    page.wait_for_url("**/signin?next=*")


def test_pages_send_a_strict_csp(user: User) -> None:
    page = user.page()
    response = page.goto("/workspaces")
    assert response is not None
    headers = response.headers
    csp = headers["content-security-policy"]
    assert "script-src 'self'" in csp and "'unsafe-inline'" not in csp
    assert "frame-ancestors 'none'" in csp
    assert headers["x-content-type-options"] == "nosniff"


def test_a_form_post_without_or_with_a_wrong_csrf_token_is_refused(user: User, anonymous: Page) -> None:
    page = user.page()
    page.goto("/workspaces")
    title = unique("forged")
    for form in ({"title": title, "goal": "g"}, {"title": title, "goal": "g", "csrf": "0" * 64}):
        response = page.request.post("/workspaces", form=form, max_redirects=0)
        assert response.status == 403
        assert "Request refused" in response.text()
    # The same form with the page's own token works, and the forged ones left nothing behind.
    titles = [w["title"] for w in user.api.ok("GET", "/v1/workspaces")["items"]]
    assert title not in titles
    page.get_by_label("Title").fill(title)
    page.get_by_label("Goal").fill("g")
    page.get_by_role("button", name="Create workspace").click()
    expect(page.get_by_role("heading", level=1)).to_have_text(title)

    # A real token of another session does not pass either: each token is bound to its own session.
    ws_id = page.url.split("/workspaces/")[1].split("?")[0]
    anonymous.goto("/signin")
    foreign = anonymous.locator("input[name=csrf]").first.get_attribute("value")
    assert foreign
    refused = page.request.post(f"/workspaces/{ws_id}/archive", form={"csrf": foreign}, max_redirects=0)
    assert refused.status == 403 and "Request refused" in refused.text()
    assert user.api.ok("GET", f"/v1/workspaces/{ws_id}")["status"] == "active"


def test_sign_in_without_the_pre_session_cookie_is_refused(anonymous: Page) -> None:
    response = anonymous.request.post("/signin", form={"token": "dsk_" + "y" * 40, "csrf": "z" * 64}, max_redirects=0)
    assert response.status == 403


def test_markup_in_titles_goals_and_documents_is_shown_as_text(user: User) -> None:
    page = user.page()
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    payload = "<script>window.__pwned = 1; alert('x')</script><img src=x onerror=\"window.__pwned = 2\">"
    ws = user.api.workspace(title=f"Fund {payload}", goal=f"Goal {payload}")
    source_id = unique("hostile")
    user.api.upload(f"A liquidity note.\n{payload}\n".encode(), source_id, "hostile.txt", ws["id"])
    user.api.publish(f"Report {payload}", f"Body {payload}", ws["id"])
    # Both reach the workspace's catalog through events; the page is rendered once, so wait for them.
    user.api.wait_catalog(ws["id"], 2)

    page.goto("/workspaces")
    expect(page.get_by_role("link", name=f"Fund {payload}")).to_be_visible()
    page.goto(f"/workspaces/{ws['id']}")
    expect(page.get_by_role("heading", level=1)).to_have_text(f"Fund {payload}")
    expect(page.locator("#goal-text")).to_have_text(f"Goal {payload}")
    page.get_by_text("Show the catalog").click()
    page.get_by_role("link", name=f"Report {payload}").click()
    expect(page.locator("#pub-body")).to_have_text(f"Body {payload}")
    page.goto(f"/evidence?q=liquidity&source_id={source_id}")
    page.locator("#hits a").first.click()
    expect(page.locator("#passage")).to_contain_text(payload)
    assert page.evaluate("window.__pwned") is None
    assert dialogs == []


def test_another_scopes_ids_are_a_not_found_page(user: User, stack: RunningStack, browser: Browser) -> None:
    other = Api(stack)
    ws = other.workspace(title="Theirs")
    pub = other.publish("Their report", "Their body.", ws["id"])
    source = other.upload(b"their liquidity note", unique("theirs"), "theirs.txt", ws["id"])
    run = other.start_run(ws["id"], "Their question?")
    evidence = other.ok("GET", f"/v1/evidence/search?q=liquidity&source_id={source['source_id']}")["items"][0]
    page = user.page()
    for path in (
        f"/workspaces/{ws['id']}",
        f"/runs/{run['id']}",
        f"/publications/{pub['id']}/versions/1",
        f"/sources/{source['source_id']}",
        f"/evidence/{evidence['evidence_id']}",
        f"/publications/{pub['id']}/diff?from=1&to=1",
    ):
        response = page.goto(path)
        assert response is not None and response.status == 404, path
        expect(page.get_by_role("heading", level=1)).to_have_text("Not found")
        expect(page.locator("body")).not_to_contain_text("Theirs")
    # The owner sees the same page.
    context = new_context(browser, stack)
    try:
        theirs = context.new_page()
        sign_in(theirs, other.http.headers["Authorization"].removeprefix("Bearer "))
        theirs.goto(f"/workspaces/{ws['id']}")
        expect(theirs.get_by_role("heading", level=1)).to_have_text("Theirs")
    finally:
        context.close()
    response = page.goto("/no/such/page")
    assert response is not None and response.status == 404
    expect(page.get_by_role("heading", level=1)).to_have_text(re.compile("Not found"))
