"""A live run in the browser: the page follows it in place (no reload: the reader keeps their place), plan.md is
edited mid-run (and recited), cancel stops it.

Runs on its own stack whose runs are paced (a scripted policy, a delay per step), so the run is still live
while the browser edits its plan.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, expect

from tests.e2e.web.axe import audit
from tests.e2e.web.conftest import new_context, sign_in
from tests.support.api import Api, probe
from tests.support.stack import RunningStack, start_stack, stop_stack

# It runs on a stack of its own: the local stack only (make test-containers deselects it).
pytestmark = pytest.mark.local_stack

# Writes the recited plan into draft.md at every step: shows what each step saw.
ECHO_PLAN = [{"name": "write_draft", "arguments": {"text": "{plan}"}} for _ in range(300)]


@pytest.fixture(scope="module")
def paced_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    scripts = tmp_path_factory.mktemp("scripts")
    (scripts / "echo-plan.json").write_text(json.dumps(ECHO_PLAN))
    env = {"DOSSIER_RUN_STEP_DELAY_SECONDS": "0.1", "DOSSIER_SCRIPTS_DIR": str(scripts)}
    running = start_stack(tmp_path_factory.mktemp("paced-home"), extra_env=env)
    try:
        yield running
    finally:
        stop_stack(running.proc)


def test_plan_edit_mid_run_and_cancel_in_the_browser(browser: Browser, paced_stack: RunningStack) -> None:
    api = Api(paced_stack)
    ws = api.workspace()
    run = api.start_run(ws["id"], "Echo the plan", model="scripted:echo-plan")
    context = new_context(browser, paced_stack)
    try:
        page = context.new_page()
        sign_in(page, api.http.headers["Authorization"].removeprefix("Bearer "))
        page.goto(f"/runs/{run['id']}")
        expect(page.locator("#run-status")).to_have_text("running")
        expect(page.locator("#files")).to_contain_text("draft.md")

        marker = "EDITED-IN-THE-BROWSER-3c9e"
        page.get_by_label("plan.md").fill(f"# Plan\n\n## Focus\n{marker}\n")
        page.get_by_role("button", name="Save plan").click()
        expect(page.get_by_role("status")).to_contain_text("plan.md saved")
        # The next step recites the edited plan: it shows up in what the run writes.
        probe(lambda: marker in api.ok("GET", f"/v1/runs/{run['id']}/files/draft.md"), timeout=30)
        page.get_by_role("link", name="draft.md").click()
        expect(page.locator("pre")).to_contain_text(marker)

        page.goto(f"/runs/{run['id']}")
        audit(page)
        # Live updates replace what changed in place: the document (and this mark on it) and the scroll stay.
        page.evaluate("window.sameDocument = true")
        page.get_by_role("heading", name="Working files").scroll_into_view_if_needed()
        scrolled = page.evaluate("window.scrollY")
        stats = page.locator("#live-stats")
        expect(stats).not_to_have_text(stats.inner_text(), timeout=30_000)  # the step count moved on
        assert page.evaluate("window.sameDocument") is True
        assert scrolled > 0 and page.evaluate("window.scrollY") == scrolled
        page.get_by_role("button", name="Cancel run").click()
        expect(page.locator("#run-status")).to_have_text("cancelled", timeout=30_000)
        expect(page.get_by_role("button", name="Cancel run")).to_have_count(0)
        expect(page.get_by_label("plan.md")).to_have_count(0)
    finally:
        context.close()
