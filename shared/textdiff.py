"""A line diff of two bodies, as hunks with context (pure; no I/O): versions of one publication (the
publication service) or the answers of two runs (the workbench)."""

from __future__ import annotations

import difflib

from shared.contracts import publication as c

CONTEXT_LINES = 3


def line_diff(old: str, new: str, *, max_lines: int) -> tuple[list[c.DiffHunk], bool]:
    """Hunks turning `old` into `new`; at most `max_lines` diff lines in all (then `truncated` is True)."""
    a, b = old.splitlines(), new.splitlines()
    matcher = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
    hunks: list[c.DiffHunk] = []
    emitted = 0
    for group in matcher.get_grouped_opcodes(CONTEXT_LINES):
        lines: list[c.DiffLine] = []
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                lines += [
                    c.DiffLine(op="context", text=a[i], from_line=i + 1, to_line=j1 + (i - i1) + 1)
                    for i in range(i1, i2)
                ]
                continue
            if tag in ("replace", "delete"):
                lines += [c.DiffLine(op="removed", text=a[i], from_line=i + 1, to_line=None) for i in range(i1, i2)]
            if tag in ("replace", "insert"):
                lines += [c.DiffLine(op="added", text=b[j], from_line=None, to_line=j + 1) for j in range(j1, j2)]
        if emitted + len(lines) > max_lines:
            return hunks, True
        emitted += len(lines)
        first, last = group[0], group[-1]
        hunks.append(
            c.DiffHunk(
                from_start=first[1] + 1,
                from_count=last[2] - first[1],
                to_start=first[3] + 1,
                to_count=last[4] - first[3],
                lines=lines,
            )
        )
    return hunks, False
