"""A step of a run a model drove, opened from the ledger: the model's journaled answer (its tool calls, their
arguments), each call's result as the model's window showed it, and the passages the ledger says went into
the request. On a stack of its own whose runs ask a fake OpenAI-compatible model (tests/support/fake_openai.py).

axe-core runs on the page shown here (tests/e2e/web/axe.py), at 1280 px and 390 px.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, expect

from tests.e2e.web.axe import audit
from tests.e2e.web.conftest import new_context, sign_in
from tests.support.api import Api
from tests.support.fake_openai import running as fake_openai_server
from tests.support.fake_openai import seeded_workspace
from tests.support.stack import RunningStack, stack_running

pytestmark = pytest.mark.local_stack


@pytest.fixture(scope="module")
def model_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    with fake_openai_server("walk") as url:
        env = {"DOSSIER_OPENAI_BASE_URL": f"{url}/v1", "DOSSIER_OPENAI_MODEL": "fake-walk"}
        with stack_running(tmp_path_factory.mktemp("steps-home"), extra_env=env) as running:
            yield running


def test_a_model_request_opens_with_its_calls_and_results(browser: Browser, model_stack: RunningStack) -> None:
    api = Api(model_stack)
    ws = seeded_workspace(api)
    run = api.wait_run(api.start_run(ws, "What holds?", model="openai")["id"], timeout=120)
    assert run["status"] == "completed", run["error"]
    included = [r for r in api.ledger(run["id"]) if r["stage"] == "included" and r["model_request"]]

    context = new_context(browser, model_stack)
    try:
        page = context.new_page()
        sign_in(page, api.http.headers["Authorization"].removeprefix("Bearer "))
        page.goto(f"/runs/{run['id']}")
        steps = page.get_by_role("navigation", name="Model requests").get_by_role("link")
        expect(steps).to_have_count(run["stats"]["model_requests"])
        step = steps.nth(1)
        name = step.text_content() or ""
        step.click()
        page.wait_for_url(f"**/runs/{run['id']}/steps/{name}")
        expect(page.get_by_role("heading", level=1)).to_have_text(f"Model request {name}")
        answer = page.locator(".step-answer").first
        expect(answer.get_by_role("heading", name="Tool calls")).to_be_visible()
        expect(answer.locator(".tool-calls li").first).to_be_visible()
        expect(answer.locator(".tool-results li").first).to_contain_text(re.compile("ok|refused"))
        expect(page.locator("#step tbody tr")).to_have_count(
            sum(1 for r in included if r["model_request"] == f"{run['id']}:{name}")
        )
        audit(page)
    finally:
        context.close()
