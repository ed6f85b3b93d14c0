"""The line diff of two publication bodies: hunks with context, line numbers on each side, a bound."""

from __future__ import annotations

from services.gateway.web.publications import side_by_side
from shared.textdiff import line_diff


def ops(hunk) -> list[tuple[str, str]]:  # type: ignore[no-untyped-def]
    return [(line.op, line.text) for line in hunk.lines]


def test_identical_bodies_have_no_hunks() -> None:
    assert line_diff("a\nb\n", "a\nb\n", max_lines=100) == ([], False)


def test_a_replaced_line_and_an_added_one() -> None:
    hunks, truncated = line_diff("a\nb\nc", "a\nB\nc\nd", max_lines=100)
    assert not truncated and len(hunks) == 1
    assert ops(hunks[0]) == [("context", "a"), ("removed", "b"), ("added", "B"), ("context", "c"), ("added", "d")]
    h = hunks[0]
    assert (h.from_start, h.from_count, h.to_start, h.to_count) == (1, 3, 1, 4)
    removed = h.lines[1]
    assert (removed.from_line, removed.to_line) == (2, None)
    assert (h.lines[3].from_line, h.lines[3].to_line) == (3, 3)


def test_distant_changes_are_separate_hunks_with_three_lines_of_context() -> None:
    old = "\n".join(f"line {i}" for i in range(1, 31))
    new = old.replace("line 2\n", "line two\n").replace("line 28", "line twenty-eight")
    hunks, _ = line_diff(old, new, max_lines=100)
    assert len(hunks) == 2
    assert [line.text for line in hunks[1].lines if line.op == "context"] == [
        "line 25",
        "line 26",
        "line 27",
        "line 29",
        "line 30",
    ]


def test_the_bound_cuts_whole_hunks_and_says_so() -> None:
    old = "\n".join(f"line {i}" for i in range(100))
    new = "\n".join(f"line {i}" if i % 20 else f"changed {i}" for i in range(100))
    hunks, truncated = line_diff(old, new, max_lines=10)
    assert truncated and 0 < len(hunks) < 5


def test_side_by_side_pairs_a_removed_run_with_the_added_run_after_it() -> None:
    hunks, _ = line_diff("a\nb\nc\nd", "a\nB\nC\nd", max_lines=100)
    rows = side_by_side(hunks)[0]
    assert [(r["left"].text if r["left"] else None, r["right"].text if r["right"] else None) for r in rows] == [
        ("a", "a"),
        ("b", "B"),
        ("c", "C"),
        ("d", "d"),
    ]
