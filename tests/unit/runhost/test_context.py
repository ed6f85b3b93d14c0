"""The model input's bound: counts instead of listings, the plan's active part, bounded answers."""

from __future__ import annotations

import re

from services.runhost.context import (
    CUT_FLOOR,
    MAX_INPUT_CHARS,
    RESULT_CHARS,
    build_messages,
    input_chars,
    recite,
    result_file,
)
from services.runhost.policies.extractive import read_so_far
from services.runhost.policies.vocabulary import RunView, ToolResult


def view(sources: int, noted: int, **kw: object) -> RunView:
    names = [f"pub_{i:04d}@v1" for i in range(sources)]
    files = {"plan.md": 9_000, "catalog.md": 40_000} | {f"sources/{n}.txt": 3_000 for n in names}
    files |= {f"notes/{n}.md": 700 for n in names[:noted]}
    plan = "# Plan\n\n## Goal (v1)\nFund X\n\n## Sources\n" + "".join(
        f"- {n} :: publication {n[:-3]}@1\n" for n in names
    )
    values: dict = {
        "run_id": "run_1",
        "goal_version": 1,
        "goal": "Assess Fund X liquidity " * 50,
        "question": "Do Fund X redemptions still hold? " * 50,
        "catalog": {"items": [], "complete": True, "omitted": 0},
        "history": [],
        "files": files,
        "plan": plan + "\n## Next steps\n- read each source\n",
        "checkpoint_revision": 1,
        "results": [],
    }
    return RunView(**(values | kw))


def read(path: str, offset: int, total: int, size: int = 1000) -> ToolResult:
    body = "x" * min(size, total - offset)
    data = {"path": path, "offset": offset, "end": offset + len(body), "total": total, "body": body}
    return ToolResult("read_file", {"path": path, "offset": offset}, f"[{path}]\n{body}", data=data)


def test_the_input_stays_bounded_at_300_sources_with_long_answers() -> None:
    transcript = [read(f"sources/pub_{i:04d}@v1.txt", 0, 3_000) for i in range(20)]
    transcript.append(ToolResult("search_evidence", {"query": "q"}, "- hit " * 2_000))
    for sources in (30, 300):
        messages = build_messages(view(sources, sources // 3), transcript)
        assert input_chars(messages) <= MAX_INPUT_CHARS
        task = messages[1]["content"]
        assert f"sources/: {sources} files" in task and "pub_0000" not in task


def test_the_plan_is_recited_by_its_active_part() -> None:
    v = view(300, 100)
    recited = recite(v.plan, v.files)
    assert "pub_0100@v1 ::" in recited and "pub_0099@v1" not in recited
    assert "(100 of 300 noted, 200 to go; full list in plan.md)" in recited
    assert "## Next steps" in recited


def test_a_file_is_read_in_parts_from_its_start() -> None:
    path = "sources/pub_0001@v1.txt"
    assert read_so_far(view(1, 0), path) == ("", 0, -1)
    parts = [read(path, 0, 2_500), read("notes/other.md", 0, 10), read(path, 1_000, 2_500)]
    body, end, total = read_so_far(view(1, 0, results=parts), path)
    assert (len(body), end, total) == (2_000, 2_000, 2_500)
    parts.append(read(path, 2_000, 2_500))
    assert read_so_far(view(1, 0, results=parts), path)[1:] == (2_500, 2_500)


POINTER = re.compile(r"… \[([\d,]+) chars in all; read_file (\S+) offset (\d+) for the rest\]$")


def kept(result: ToolResult, step: int) -> ToolResult:
    """The result as the loop keeps it: a long one is on file (services/runhost/loop.py)."""
    path = result_file(result, step)
    if path is not None:
        result.data["result_path"] = path
    return result


def test_a_cut_answer_ends_with_the_file_and_offset_of_its_rest() -> None:
    text = "".join(f"- [source] ev_{i}: minutes@1 page:{i}: " + "gates " * 15 + "\n" for i in range(30))
    search = kept(ToolResult("search_evidence", {"query": "gates"}, text), 7)
    assert search.data["result_path"] == "results/0007.md"
    for v in (view(3, 0), view(300, 100)):
        shown = build_messages(v, [search])[-2]["content"]
        cut = POINTER.search(shown)
        assert cut is not None and cut[2] == "results/0007.md", shown[-120:]
        assert shown == text[: int(cut[3])] + cut[0] and len(shown) <= RESULT_CHARS
        assert int(cut[1].replace(",", "")) == len(text)


def test_a_cut_page_of_read_file_points_to_the_offset_in_its_own_file() -> None:
    # A page longer than the window shows one answer (read_file's own bound keeps its pages shorter).
    page = kept(read("sources/pub_0001@v1.txt", 2_000, 9_000, size=1_500), 3)
    assert "result_path" not in page.data, "a page read is in its own file already"
    shown = build_messages(view(300, 100), [page])[-2]["content"]
    cut = POINTER.search(shown)
    assert cut is not None and cut[2] == "sources/pub_0001@v1.txt", shown[-120:]
    header = page.text.partition("\n")[0] + "\n"
    assert int(cut[3]) == 2_000 + len(shown) - len(cut[0]) - len(header)


def test_a_short_answer_is_never_cut_and_never_kept_apart() -> None:
    short = kept(ToolResult("read_publication", {"id": "pub_1", "version": 1}, "y" * CUT_FLOOR), 1)
    assert "result_path" not in short.data
    messages = build_messages(view(300, 100, plan="# Plan\n" + "p" * 9_000), [short])
    assert messages[-2]["content"] == short.text
