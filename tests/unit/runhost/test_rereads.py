"""A model reading again what it already read (services/runhost/replies.py `Rereads`): each re-read is told
so, and a row of them, with nothing new read or written between, is a loop."""

from __future__ import annotations

from dataclasses import asdict

from services.runhost.policies.vocabulary import ToolResult
from services.runhost.replies import Rereads


def read(path: str = "catalog.md", offset: int = 0, text: str = "the catalog") -> ToolResult:
    return ToolResult("read_file", {"path": path, "offset": offset}, text, data={"path": path})


def write(tool: str, text: str, **arguments: str) -> ToolResult:
    return ToolResult(tool, arguments | {"text": text}, "wrote it")


def test_a_row_of_rereads_is_a_loop_and_each_is_told_so() -> None:
    rereads = Rereads(3)
    first = read()
    rereads.see(first)
    assert first.text == "the catalog" and rereads.in_a_row == 0
    seen = []
    for _ in range(3):
        again = read()
        rereads.see(again)
        seen.append(again.text)
    assert rereads.looping and rereads.in_a_row == 3
    assert seen[0].startswith("(already read: this call answered the same earlier in the run; 2 more like it")
    assert seen[-1].endswith("the run ends now. Read something new, write a note or a draft, or finish)\nthe catalog")


def test_a_new_read_or_a_write_that_changes_a_file_ends_the_row() -> None:
    rereads = Rereads(3)
    rereads.see(read())
    rereads.see(read())
    rereads.see(read(offset=1000, text="more of it"))
    assert rereads.in_a_row == 0
    rereads.see(read())
    rereads.see(write("write_note", "a note", source="a"))
    assert rereads.in_a_row == 0
    # The same file read again after it changed answers something else: a new read.
    rereads.see(read("notes/a.md", text="a note"))
    rereads.see(write("write_note", "a longer note", source="a"))
    rereads.see(read("notes/a.md", text="a longer note"))
    assert rereads.in_a_row == 0


def test_failures_and_writes_that_change_nothing_do_not_hide_a_loop() -> None:
    rereads = Rereads(3)
    rereads.see(read())
    rereads.see(write("write_draft", "draft"))
    for _ in range(3):
        rereads.see(read())
        rereads.see(write("write_draft", "draft"))
        rereads.see(ToolResult("read_evidence", {"evidence_id": "x"}, "error: not_found", ok=False))
    assert rereads.looping


def test_a_resumed_run_judges_its_journaled_results_as_they_were() -> None:
    """The journal keeps each result as the model saw it, a re-read's word included; what it first read is
    kept with it, so the attempt that resumes counts the same row."""
    first = Rereads(3)
    results = [read(), read(), read()]
    for result in results:
        first.see(result)
    journaled = [ToolResult(**asdict(r)) for r in results]
    resumed = Rereads(3)
    resumed.replay(journaled)
    assert resumed.in_a_row == first.in_a_row == 2
    assert [r.text for r in journaled] == [r.text for r in results]
    again = read()
    resumed.see(again)
    assert resumed.looping and again.text.startswith("(already read")
