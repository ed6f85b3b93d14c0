"""Refusals beside the field they are about, with the typed text kept; blank text is refused, in the browser.

axe-core runs on every page shown here (tests/e2e/web/axe.py), at 1280 px and 390 px.
"""

from __future__ import annotations

from playwright.sync_api import Page, expect

from tests.e2e.web.axe import audit
from tests.e2e.web.conftest import User, submit, unique


def refused_beside(page: Page, label: str, message: str) -> None:
    """The field is marked invalid and described by the message shown right after it."""
    box = page.get_by_label(label, exact=True)
    expect(box).to_have_attribute("aria-invalid", "true")
    described = box.get_attribute("aria-describedby")
    assert described, label
    expect(page.locator(f"#{described}")).to_contain_text(message)


def test_a_blank_question_is_refused_beside_the_field_and_starts_no_run(user: User) -> None:
    ws = user.api.workspace(title="Blank questions")
    a1 = user.api.publish("Report A: Fund X liquidity", "Fund X can meet redemptions within 30 days.", ws["id"])
    # The publication reaches the workspace's catalog (the page's list of what a run may read) by an event.
    user.api.wait_catalog(ws["id"], 1)
    page = user.page()
    page.goto(f"/workspaces/{ws['id']}")
    audit(page)
    page.get_by_label("Question").fill("   ")
    page.get_by_label("Report A: Fund X liquidity v1").check()
    response_status = []
    page.on("response", lambda r: response_status.append(r.status) if r.request.method == "POST" else None)
    page.get_by_role("button", name="Start run").click()
    refused_beside(page, "Question", "must not be blank")
    expect(page.get_by_label("Question")).to_have_value("   ")
    expect(page.get_by_label("Report A: Fund X liquidity v1")).to_be_checked()
    assert response_status == [422]
    expect(page.get_by_role("heading", level=1)).to_have_text("Blank questions")
    audit(page)
    assert user.api.items(f"/v1/workspaces/{ws['id']}/runs") == []
    assert a1["version"] == 1

    # A run of an archived workspace is refused beside the question too, the question kept.
    user.api.ok("POST", f"/v1/workspaces/{ws['id']}/archive")
    submit(page, "Start run", {"Question": "Anything new?"})
    refused_beside(page, "Question", "archived")
    expect(page.get_by_label("Question")).to_have_value("Anything new?")


def test_blank_titles_and_goals_are_refused_beside_their_fields(user: User) -> None:
    page = user.page()
    page.goto("/workspaces")
    submit(page, "Create workspace", {"Title": "  ", "Goal": "A goal worth keeping"})
    refused_beside(page, "Title", "must not be blank")
    expect(page.get_by_label("Goal")).to_have_value("A goal worth keeping")
    audit(page)

    title = unique("Fund X")
    submit(page, "Create workspace", {"Title": title, "Goal": " \n "})
    refused_beside(page, "Goal", "must not be blank")
    expect(page.get_by_label("Title")).to_have_value(title)
    submit(page, "Create workspace", {"Goal": "Assess the liquidity risk of Fund X"})
    expect(page.get_by_role("heading", level=1)).to_have_text(title)

    page.get_by_text("Edit the goal").click()
    page.get_by_label("Goal", exact=True).fill("\t ")
    page.get_by_role("button", name="Save goal").click()
    refused_beside(page, "Goal", "must not be blank")
    expect(page.locator("#goal-version")).to_have_text("1")

    submit(page, "Publish", {"Title": " ", "Body": "A body that must not be lost."})
    refused_beside(page, "Title", "must not be blank")
    expect(page.get_by_label("Body")).to_have_value("A body that must not be lost.")
    audit(page)


def test_a_conflicting_revision_keeps_the_typed_body_beside_the_message(user: User) -> None:
    pub = user.api.publish(unique("Report A"), "Version one.")
    first, second = user.page(), user.page()
    for tab in (first, second):
        tab.goto(f"/publications/{pub['id']}/versions/1")
    submit(first, "Save as v2", {"New body": "Version two, from the first tab."})
    expect(first.locator("#pub-body")).to_contain_text("Version two, from the first tab.")

    typed = "Version two, from the second tab,\nwritten with care."
    submit(second, "Save as v2", {"New body": typed})
    refused_beside(second, "New body", "newer version")
    expect(second.get_by_label("New body")).to_have_value(typed)
    expect(second.locator("#pub-body")).to_contain_text("Version two, from the first tab.")
    audit(second)
    second.get_by_role("button", name="Save as v3").click()
    expect(second.locator("#pub-body")).to_contain_text("written with care.")


def test_a_failed_import_lists_the_approved_roots_beside_the_root(user: User) -> None:
    page = user.page()
    page.goto("/import")
    audit(page)
    page.get_by_label("Root", exact=True).fill("nowhere")
    submit(page, "Import", {"Path inside the root": "a.txt", "Source id": "imported"})
    refused_beside(page, "Root", "not an approved root")
    expect(page.locator("#approved-roots")).to_contain_text("docs")
    expect(page.get_by_label("Path inside the root")).to_have_value("a.txt")
    expect(page.get_by_label("Source id")).to_have_value("imported")
    audit(page)
