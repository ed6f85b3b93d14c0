"""Goal CAS conflicts between two tabs, and a checkpoint made unavailable by a withdrawal and a retirement."""

from __future__ import annotations

from pathlib import Path

from playwright.sync_api import expect

from tests.e2e.web.conftest import User, submit, unique
from tests.support.documents import ANNOUNCEMENT, pdf


def test_goal_conflict_in_two_tabs_keeps_the_typed_text(user: User) -> None:
    ws = user.api.workspace(title="Two tabs", goal="First goal")
    first, second = user.page(), user.page()
    for tab in (first, second):
        tab.goto(f"/workspaces/{ws['id']}")
        expect(tab.locator("#goal-version")).to_have_text("1")
        tab.get_by_text("Edit the goal").click()

    submit(first, "Save goal", {"Goal": "Goal from the first tab"})
    expect(first.locator("#goal-version")).to_have_text("2")

    typed = "Goal from the second tab,\nwritten with care"
    submit(second, "Save goal", {"Goal": typed})
    alert = second.get_by_role("alert")
    expect(alert).to_contain_text("Conflict")
    expect(alert).to_contain_text("version 2")
    expect(second.locator("#goal-version")).to_have_text("2")
    expect(second.locator("#goal-text")).to_have_text("Goal from the first tab")
    expect(second.get_by_label("Goal")).to_have_value(typed)

    # Saving again, knowingly over version 2, makes version 3 from the kept text.
    second.get_by_role("button", name="Save goal").click()
    expect(second.locator("#goal-version")).to_have_text("3")
    expect(second.locator("#goal-text")).to_have_text(typed)
    versions = user.api.ok("GET", f"/v1/workspaces/{ws['id']}/goal/versions")["items"]
    assert [v["text"] for v in versions] == ["First goal", "Goal from the first tab", typed]


def test_a_withdrawn_publication_and_a_retired_source_make_the_checkpoint_unavailable(user: User) -> None:
    api = user.api
    ws = api.workspace()
    a1 = api.publish("Report A: Fund X liquidity", "Fund X can meet redemptions within 30 days.", ws["id"])
    source_id = unique("announcement")
    api.upload(pdf(ANNOUNCEMENT), source_id, "announcement.pdf", ws["id"])
    run = api.start_run(
        ws["id"], "Do Fund X redemption judgements still hold?", history=[{"publication_id": a1["id"], "version": 1}]
    )
    assert api.wait_run(run["id"])["status"] == "completed"

    page = user.page()
    page.goto(f"/workspaces/{ws['id']}")
    expect(page.locator("#checkpoint-status")).to_have_text("valid")

    page.goto(f"/publications/{a1['id']}/versions/1")
    page.get_by_role("link", name="Withdraw v1…").click()
    submit(page, "Withdraw version", {"Reason": "superseded by the announcement"})
    expect(page.locator("#pub-status")).to_have_text("withdrawn")
    expect(page.get_by_role("alert")).to_contain_text("withdrawn: superseded by the announcement")

    page.goto(f"/workspaces/{ws['id']}")
    expect(page.locator("#checkpoint-status")).to_have_text("unavailable")
    expect(page.locator("#unavailable-sources")).to_contain_text(f"{a1['id']}@v1: withdrawn")

    page.goto(f"/sources/{source_id}")
    page.get_by_role("link", name="Retire…").click()
    page.get_by_role("button", name="Retire source").click()
    expect(page.locator("#source-versions")).to_contain_text("retired")
    page.goto(f"/workspaces/{ws['id']}")
    expect(page.locator("#unavailable-sources")).to_contain_text(f"{source_id}@v1: retired")
    # A withdrawn version cannot be picked for a new run.
    expect(page.get_by_label("Report A: Fund X liquidity v1")).to_be_disabled()


def test_refusals_are_readable_messages_on_the_page(user: User, tmp_path: Path) -> None:
    ws = user.api.workspace(title="Refusals")
    page = user.page()
    page.goto(f"/workspaces/{ws['id']}")
    page.get_by_role("link", name="Archive…").click()
    page.get_by_role("button", name="Archive workspace").click()
    expect(page.locator(".notice")).to_contain_text("archived")
    submit(page, "Start run", {"Question": "Anything new?"})
    expect(page.locator("#question-error")).to_contain_text("archived")
    expect(page.get_by_label("Question")).to_have_value("Anything new?")

    page.goto(f"/workspaces/{ws['id']}")
    page.get_by_role("button", name="Unarchive").click()
    expect(page.locator(".notice")).to_contain_text("unarchived")
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    page.get_by_label("Source id").fill(unique("empty"))
    page.get_by_label("File").set_input_files(str(empty))
    page.get_by_role("button", name="Upload").click()
    expect(page.locator(".upload-status")).to_contain_text("the file is empty")

    page.goto(f"/workspaces/{ws['id']}/delete")
    page.get_by_role("button", name="Delete workspace").click()
    page.wait_for_url("**/workspaces?notice=*")
    expect(page.get_by_role("link", name="Refusals")).to_have_count(0)
    response = page.goto(f"/workspaces/{ws['id']}")
    assert response is not None and response.status == 404
