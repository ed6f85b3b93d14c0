"""The answer as a small, static HTML report: styled, its citations linked, a way back to its run.

No scripts, nothing fetched: the styles are inline, and the report is served inside a CSP sandbox. Its
links are paths of the workbench that serves it (the run, each cited passage or publication version).
"""

from __future__ import annotations

import html
from urllib.parse import quote

from shared.markdown import render_markdown

STYLE = """
body { margin: 0 auto; max-width: 46rem; padding: 1.5rem; font: 16px/1.55 system-ui, -apple-system, "Segoe UI",
  Roboto, sans-serif; color: #1d2330; background: #fff; overflow-wrap: break-word; }
nav { font-size: 14px; margin-bottom: 1rem; }
a { color: #1f5fbf; overflow-wrap: anywhere; }
h1 { font-size: 1.6rem; line-height: 1.25; }
h2 { font-size: 1.2rem; margin-top: 1.8rem; border-top: 1px solid #d9dde5; padding-top: .5rem; }
li { margin: .3rem 0; }
a.cite { font-size: .92em; }
code { font: .9em ui-monospace, Menlo, Consolas, monospace; }
footer { margin-top: 2rem; color: #5b6473; font-size: 13px; }
"""


def render_report(title: str, markdown: str, *, run_id: str) -> str:
    run = html.escape(run_id)
    back = f"/runs/{quote(run_id, safe='')}"
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{html.escape(title)}</title><style>{STYLE}</style></head>\n"
        f'<body data-run="{run}">\n<nav><a href="{back}">← Back to the run in the workbench</a></nav>\n'
        f"<main>\n{render_markdown(markdown)}</main>\n"
        f"<footer>Report of run {run}. Each citation links to the passage or publication version it names."
        "</footer>\n</body></html>\n"
    )
