"""A real headless browser (Debian's chromium, driven by Playwright) against the session's whole stack."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, Playwright, sync_playwright

from tests.support.api import Api
from tests.support.documents import ANNOUNCEMENT, pdf
from tests.support.stack import RunningStack

CHROMIUM = os.environ.get("DOSSIER_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
VIEWPORT = {"width": 1100, "height": 800}


# Module-scoped, never session-scoped: Playwright's sync API holds an event loop as running for as long
# as it is started, and the async tests that run after these modules need the thread's loop free.
@pytest.fixture(scope="module")
def playwright() -> Iterator[Playwright]:
    with sync_playwright() as driver:
        yield driver


@pytest.fixture(scope="module")
def browser(playwright: Playwright) -> Iterator[Browser]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"no browser at {CHROMIUM}: install Debian's chromium (`apt-get install chromium`; .ci/run does)")
    browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
    try:
        yield browser
    finally:
        browser.close()


@dataclass
class User:
    """One scope's person: an API client for setup, and a browser context signed in with the same scope."""

    api: Api
    token: str
    context: BrowserContext
    url: str

    def page(self) -> Page:
        return self.context.new_page()


def new_context(browser: Browser, stack: RunningStack) -> BrowserContext:
    context = browser.new_context(base_url=stack.url, viewport=VIEWPORT)
    context.set_default_timeout(30_000)
    return context


def sign_in(page: Page, token: str) -> None:
    page.goto("/signin")
    page.get_by_label("Token").fill(token)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url("**/workspaces")


@pytest.fixture
def user(browser: Browser, stack: RunningStack) -> Iterator[User]:
    api = Api(stack)
    token = api.http.headers["Authorization"].removeprefix("Bearer ")
    context = new_context(browser, stack)
    try:
        sign_in(context.new_page(), token)
        yield User(api, token, context, stack.url)
    finally:
        context.close()


@pytest.fixture
def anonymous(browser: Browser, stack: RunningStack) -> Iterator[Page]:
    context = new_context(browser, stack)
    try:
        yield context.new_page()
    finally:
        context.close()


@pytest.fixture
def screens(tmp_path: Path) -> Path:
    """Where the running example's screenshots go: `DOSSIER_SCREENS` (e.g. docs/screens) or a temporary folder."""
    target = Path(os.environ.get("DOSSIER_SCREENS") or tmp_path / "screens")
    target.mkdir(parents=True, exist_ok=True)
    return target


def submit(page: Page, button: str, fields: dict[str, str]) -> None:
    """Type each field's text (by its label), then press the form's button."""
    for label, text in fields.items():
        page.get_by_label(label).fill(text)
    page.get_by_role("button", name=button).click()


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True)
class FundX:
    """The running example's workspace: one earlier report (`report`, at version 1) and the announcement."""

    workspace: dict[str, Any]
    report: dict[str, Any]
    source_id: str

    @property
    def history(self) -> list[dict[str, Any]]:
        return [{"publication_id": self.report["id"], "version": 1}]


def fund_x_workspace(api: Api, title: str) -> FundX:
    ws = api.workspace(title=unique(title))
    report = api.publish("Report A: Fund X liquidity", "Fund X can meet redemptions within 30 days.", ws["id"])
    source_id = unique("announcement")
    api.upload(pdf(ANNOUNCEMENT), source_id, "announcement.pdf", ws["id"])
    return FundX(ws, report, source_id)
