"""The default policy: deterministic, offline, extractive.

It decides each step from the model input alone (plan.md, the working files, this attempt's tool
results), so a resumed run continues where its files say it is: sources with notes are done. Where calls do
not depend on each other it answers with several at once, as a model's parallel tool calls: the next call of
each of the first few sources still to do, then the notes read back a few at a time.

Its cost is bounded by the question, not by the workspace's age: of the earlier runs' answers it reads the
few most relevant (the newest answer to each question), however many runs came before. Its answer cites only
what it read: text it quotes from a source cites nothing (`inert`).
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from itertools import islice
from typing import Any

from services.runhost.memory import source_name
from services.runhost.policies.questions import findings, unanswered_parts
from services.runhost.policies.text import bm25_scores, clip, key_sentences, tokens
from services.runhost.policies.vocabulary import ModelInput, RunView, ToolCall, ToolResult
from shared.contracts.workspace import CatalogItem

MAX_SOURCES = 40
# Earlier runs' answers read at most. Each answer carries forward what the answers it read concluded, so
# the newest relevant few are the workspace's memory of its runs.
EARLIER_RUNS = 3
# When no title is relevant to the question, this many are read anyway (the oldest publications, the
# newest answers).
FALLBACK = 3
# A read is bounded by the tool (READ_LIMIT_MAX); a longer file is read in parts, in order.
READ_CHARS = 1_000
# Calls in one reply at most (as a model's parallel calls): sources are read, their files read on, their notes
# written and read back this many at a time (the loop cuts a reply to the steps the run has left).
BATCH = 8
NOTHING_FOUND = "- (nothing relevant was found)"
# An entry may end with what a person knows it by (` — “title”`); plans written before that have none.
_ENTRY = re.compile(r"^- (?P<name>\S+) :: (?P<kind>publication|evidence) (?P<target>\S+)(?: — “(?P<title>.*)”)?$")


@dataclass(frozen=True)
class Entry:
    name: str
    kind: str
    target: str  # `id@version` for a publication, the evidence id for evidence
    title: str | None = None  # a publication's title, a passage's source and locator: for the person reading


def _section(plan: str, title: str) -> list[str] | None:
    match = re.search(rf"^## {re.escape(title)}\s*$(?P<body>.*?)(?=^## |\Z)", plan, re.M | re.S)
    return None if match is None else [line.strip() for line in match["body"].strip().splitlines()]


def parse_sources(plan: str) -> list[Entry] | None:
    """The source list of plan.md: None while it has not been chosen, [] when nothing was relevant."""
    lines = _section(plan, "Sources")
    if not lines:
        return None
    entries = [Entry(**m.groupdict()) for line in lines if (m := _ENTRY.match(line))]
    if entries or NOTHING_FOUND in lines:
        return entries
    return None


def query_of(view: RunView) -> str:
    focus = " ".join(_section(view.plan, "Focus") or [])
    return f"{view.question} {view.goal} {focus}"


def search_query(view: RunView) -> str:
    """Any of the question's and goal's terms (web-search syntax: `a or b`), most specific first."""
    terms = list(dict.fromkeys(tokens(query_of(view))))
    return " or ".join(terms[:16]) or view.question[:200]


def _call(name: str, **arguments: Any) -> ToolCall:
    return ToolCall(name, arguments, call_id=f"x-{name}")


def _last(view: RunView, tool: str) -> ToolResult | None:
    return next((r for r in reversed(view.results) if r.tool == tool), None)


def choose_sources(view: RunView, hits: list[dict[str, Any]]) -> list[Entry]:
    """The selected history first at its exact versions, then relevant catalog reports, then evidence."""
    chosen: list[Entry] = []
    seen: set[str] = set()

    def add(entry: Entry) -> None:
        if entry.name not in seen and len(chosen) < MAX_SOURCES:
            seen.add(entry.name)
            chosen.append(entry)

    titles = {i.id: i.title for i in view.catalog.items if i.kind == "publication"}
    for h in view.history:
        add(
            Entry(
                source_name("publication", h.publication_id, h.version),
                "publication",
                f"{h.publication_id}@{h.version}",
                _named(titles.get(h.publication_id)),
            )
        )
    # An explicit history selection is the user's choice of earlier conclusions: no other versions are added.
    pubs = [] if view.history else [i for i in view.catalog.items if i.kind == "publication" and i.available]
    # Every relevant publication no run produced (the analyst's own), then a bounded few of the runs' answers.
    analyst = relevant(view, [i for i in pubs if i.run_id is None], newest_first=False)
    runs = relevant(view, newest_per_title([i for i in pubs if i.run_id is not None]), newest_first=True)
    for item in analyst + runs[:EARLIER_RUNS]:
        name = source_name("publication", item.id, item.version)
        add(Entry(name, "publication", f"{item.id}@{item.version}", _named(item.title)))
    for hit in hits:
        title = _named(f"{hit.get('source_id', '')} v{hit.get('version', '')} {hit.get('locator', '')}")
        add(Entry(source_name("evidence", "E-" + hit["evidence_id"], None), "evidence", hit["evidence_id"], title))
    return chosen


def _named(title: str | None) -> str | None:
    """A title as one line of plan.md says it: whitespace folded, no closing quote to end it early, bounded."""
    text = " ".join((title or "").replace("”", "'").split())[:120]
    return text or None


def relevant(view: RunView, items: list[CatalogItem], *, newest_first: bool) -> list[CatalogItem]:
    """The items whose titles share terms with the question and goal, best first (ties: by age), or the
    first FALLBACK by age when none does."""
    scores = bm25_scores(query_of(view), [i.title for i in items])

    def order(i: int) -> tuple[float, float, str]:
        age = items[i].created_at.timestamp()
        return (-scores[i], -age if newest_first else age, items[i].id)

    ranked = sorted(range(len(items)), key=order)
    return [items[i] for i in ranked if scores[i] > 0] or [items[i] for i in ranked[:FALLBACK]]


def newest_per_title(items: list[CatalogItem]) -> list[CatalogItem]:
    """Of runs' answers under one title (runs of one question), the newest: it carries the others forward."""
    newest: dict[str, CatalogItem] = {}
    for item in items:
        title = " ".join(item.title.lower().split())
        if title not in newest or (item.created_at, item.id) > (newest[title].created_at, newest[title].id):
            newest[title] = item
    return list(newest.values())


def inert(text: str) -> str:
    """Text quoted from what the run read, citing nothing: the citations in it are its source's, not this
    run's reads. Read as a reader reads it (character references decoded), its at signs become look-alikes
    and its ampersands start no reference, so no form of citation (shared/citations.py) is left in it."""
    return html.unescape(text).replace("&", "&amp;").replace("@", "\uff20")


def plan_with_sources(plan: str, entries: list[Entry]) -> str:
    listing = (
        "\n".join(f"- {e.name} :: {e.kind} {e.target}" + (f" — “{e.title}”" if e.title else "") for e in entries)
        or NOTHING_FOUND
    )
    steps = "- read each source, write one note per source\n- compose the answer from the notes\n"
    plan = re.sub(r"^## Sources\s*$.*?(?=^## |\Z)", f"## Sources\n{listing}\n\n", plan, flags=re.M | re.S)
    return re.sub(r"^## Next steps\s*$.*?(?=^## |\Z)", f"## Next steps\n{steps}", plan, flags=re.M | re.S)


def read_so_far(view: RunView, path: str) -> tuple[str, int, int]:
    """(the text read of a file from its start, where it ends, the file's length; -1 when not read yet),
    from this attempt's read_file answers in order: the parts a bounded read gives, joined."""
    body, end, total = "", 0, -1
    for r in view.results:
        if r.tool == "read_file" and r.ok and r.data.get("path") == path and r.data.get("offset") == end:
            body, end, total = body + r.data["body"], r.data["end"], r.data["total"]
    return body, end, total


def compose_note(entry: Entry, body: str, end: int, total: int, query: str) -> str:
    first, _, rest = body.partition("\n")
    if entry.kind == "publication":
        rest = findings(rest)  # an earlier answer's question and its list of what it did not find are no finding
    sentences = key_sentences(rest, query) or [clip(" ".join(rest.split()))]
    coverage = f"chars 0-{end} of {total}"
    lines = [
        f"# Note: {entry.name}",
        f"kind: {entry.kind}",
        f"target: {entry.target}",
        f"heading: {first.lstrip('# ')}",
        "status: read",
        f"read: {coverage}",
        "",
        *[f"- {inert(s)}" for s in sentences],
    ]
    return "\n".join(lines) + "\n"


def unavailable_note(entry: Entry, result: ToolResult) -> str:
    reason = result.data.get("reason", "unavailable")
    return f"# Note: {entry.name}\nkind: {entry.kind}\ntarget: {entry.target}\nstatus: unavailable\nreason: {reason}\n"


def _field(note: str, name: str) -> str:
    match = re.search(rf"^{name}: (.*)$", note, re.M)
    return match[1].strip() if match else ""


def compose_answer(view: RunView, entries: list[Entry], notes: dict[str, str]) -> tuple[str, dict[str, Any]]:
    earlier, new, unresolved = [], [], []
    covered: set[str] = set()
    for e in entries:
        note = notes.get(e.name, "")
        bullets = [line[2:] for line in note.splitlines() if line.startswith("- ")]
        covered.update(tokens(" ".join(bullets)))  # what was found, not the title it was found under
        if _field(note, "status") != "read":
            unresolved.append(f"- {e.kind} {e.target} was not read: {_field(note, 'reason') or 'unavailable'}")
            continue
        heading = _field(note, "heading")
        if e.kind == "publication":
            match = re.match(r"(?P<title>.*) \((?P<ref>\S+), (?P<date>[^)]*)\)$", heading)
            title, date = (match["title"], match["date"][:10]) if match else (heading, "date unknown")
            title = inert(title)
            earlier.append(f"- **{title}** ({e.target}, concluded {date}): {' '.join(bullets)}")
        else:
            new.append(f"- {heading}: {' '.join(bullets)}")
    unchosen = [
        i
        for i in view.catalog.items
        if i.kind == "publication" and source_name("publication", i.id, i.version) not in {e.name for e in entries}
    ]
    if unchosen:
        unresolved.append(
            f"- {len(unchosen)} catalog publications were not read (not relevant by title, or unavailable)"
        )
    if not view.catalog.complete:
        unresolved.append(f"- the catalog was incomplete: {view.catalog.omitted} items were omitted and not considered")
    gaps = sorted({t for t in tokens(view.question) if t not in covered})
    if gaps:
        unresolved.append("- no evidence read covers: " + ", ".join(gaps))
    answer = "\n".join(
        [
            f"# {inert(view.question)}",
            "",
            f"Goal version {view.goal_version}. Earlier reports are what was concluded then;"
            " new evidence is dated by its source version.",
            "",
            "## What earlier reports concluded",
            *(earlier or ["- none were read"]),
            "",
            "## What the new evidence says",
            *(new or ["- no new evidence was read"]),
            "",
            "## Not resolved or not read",
            *(unresolved or ["- nothing"]),
            "",
        ]
    )
    summary = f"{len(earlier)} earlier reports and {len(new)} evidence passages read for: {view.question}"
    proposal = {
        "summary": summary,
        "add_questions": unanswered_parts(view.question, covered),
        "resolve_questions": [],
        "expected_revision": view.checkpoint_revision,
    }
    return answer, proposal


class ExtractivePolicy:
    async def next_step(self, model_input: ModelInput) -> ToolCall:
        view = model_input.view
        entries = parse_sources(view.plan)
        if entries is None:
            if _last(view, "list_catalog") is None:
                return _call("list_catalog")
            search = _last(view, "search_evidence")
            if search is None:
                return _call("search_evidence", query=search_query(view))
            return _call(
                "update_plan", text=plan_with_sources(view.plan, choose_sources(view, search.data.get("hits", [])))
            )
        latest = {r.data["path"]: r for r in view.results if isinstance(r.data.get("path"), str)}
        batch = list(islice(filter(None, (_source_step(view, e, latest) for e in entries)), BATCH))
        if batch:
            return _parallel(batch)
        notes, reads = {}, []
        for entry in entries:
            path = f"notes/{entry.name}.md"
            body, end, total = read_so_far(view, path)
            if end != total:
                reads.append(_call("read_file", path=path, offset=end, limit=READ_CHARS))
            notes[entry.name] = body
        if reads:
            return _parallel(reads[:BATCH])
        answer, proposal = compose_answer(view, entries, notes)
        last = view.results[-1] if view.results else None
        if last is None or last.tool != "write_draft":
            return _call("write_draft", text=answer)
        return _call("finish", answer=answer, checkpoint_proposal=proposal)


def _source_step(view: RunView, entry: Entry, latest: dict[str, ToolResult]) -> ToolCall | None:
    """A source's next call: read it, read its file on from where the last part ended, or write its note
    (None once the note is written)."""
    if f"notes/{entry.name}.md" in view.files:
        return None
    path = f"sources/{entry.name}.txt"
    outcome = latest.get(path)
    if outcome is not None and not outcome.ok:
        return _call("write_note", source=entry.name, text=unavailable_note(entry, outcome))
    if path not in view.files:
        if entry.kind == "publication":
            pub_id, _, version = entry.target.rpartition("@")
            return _call("read_publication", id=pub_id, version=int(version))
        return _call("read_evidence", evidence_id=entry.target)
    body, end, total = read_so_far(view, path)
    if end == total:
        return _call("write_note", source=entry.name, text=compose_note(entry, body, end, total, query_of(view)))
    return _call("read_file", path=path, offset=end, limit=READ_CHARS)


def _parallel(calls: list[ToolCall]) -> ToolCall:
    """One reply of several calls (as a model's parallel calls), each with its own id."""
    for n, call in enumerate(calls):
        call.call_id = f"{call.call_id}-{n}"
    first, *rest = calls
    first.siblings = rest
    return first
