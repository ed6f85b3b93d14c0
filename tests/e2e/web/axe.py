"""axe-core on a page, at the desktop and the phone width: no serious or critical violation may remain.

The script is evaluated through the DevTools protocol, which the page's Content-Security-Policy does not
govern: the page under test keeps its own strict policy.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from playwright.sync_api import Page

AXE = (Path(__file__).parent / "vendor" / "axe.min.js").read_text(encoding="utf-8")
WIDTHS = (1280, 390)
BLOCKING = ("serious", "critical")
# The innermost elements that reach past the right edge of the screen: what makes a page too wide.
PAST_EDGE = """() => Array.from(document.querySelectorAll('body *'))
  .filter(e => e.getBoundingClientRect().right > document.documentElement.clientWidth + 1)
  .filter(e => { for (let p = e.parentElement; p; p = p.parentElement) {
      if (getComputedStyle(p).overflowX !== 'visible') return false; } return true; })
  .filter(e => !Array.from(e.children).some(c => c.getBoundingClientRect().right > document.documentElement.clientWidth + 1))
  .slice(0, 5).map(e => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') + ' ' + (e.textContent || '').trim().slice(0, 40))"""


def violations(page: Page) -> list[dict[str, Any]]:
    if not page.evaluate("typeof window.axe !== 'undefined'"):
        page.evaluate(AXE)
    found: list[dict[str, Any]] = page.evaluate(
        "async () => (await axe.run(document, {resultTypes: ['violations']})).violations"
    )
    return [v for v in found if v.get("impact") in BLOCKING]


def audit(page: Page) -> None:
    """axe at 1280 px and at 390 px, and no wider than the screen at either; the page keeps its width."""
    before = page.viewport_size or {"width": 1280, "height": 800}
    problems = []
    try:
        for width in WIDTHS:
            page.set_viewport_size({"width": width, "height": before["height"]})
            wide = page.evaluate("document.documentElement.scrollWidth")
            if wide > width:
                problems.append(f"{width}px: the page is {wide}px wide, past the edge: {page.evaluate(PAST_EDGE)}")
            for v in violations(page):
                nodes = [" ".join(n["target"]) if isinstance(n["target"], list) else n["target"] for n in v["nodes"]]
                problems.append(f"{width}px {v['impact']} {v['id']}: {v['help']} at {nodes[:5]}")
    finally:
        page.set_viewport_size(before)
    assert not problems, f"axe on {page.url}:\n" + "\n".join(problems)
