"""What an extractive run costs as its workspace ages: run 10 against run 30 (`--runs N` for more) of
workspaces of 10 sources (PDFs) and 2 analyst notes (publications), each run asked a question of its day, one
after another, so every run has the earlier runs' answers in its catalog. Two identical workspaces: one is
run up to its run 10, the other up to the last run, and their last five runs are taken in turn, so that the
machine's other work (these machines are shared) weighs on both alike.

Prints each measured run's steps, model requests, model input characters, seconds (admission to end) and
what it read (passages, analyst notes, earlier runs' answers), the ratios of the later run over run 10 (for
seconds, the medians of the five runs up to each, as one run's time is noisy), and GOAL lines: the later
run's steps, and its seconds (median of five), within 1.2 of run 10's. Passages are found by search, whatever the
catalog page holds; which analyst notes a run is shown is the catalog's choice (docs/architecture.md "The
catalog a run is admitted with"), and a run shown fewer reads fewer.
Starts its own stack in a temporary folder and stops it. Never part of the tests.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._stats import goal
from tests.support.api import Api
from tests.support.documents import pdf
from tests.support.stack import start_stack, stop_stack

SOURCES, NOTES = 10, 2
QUESTION = "What do the Fund X liquidity reports conclude about redemptions?"
FIRST = 10
GOAL_RATIO = 1.2


def seconds(run: dict[str, Any]) -> float:
    return (datetime.fromisoformat(run["finished_at"]) - datetime.fromisoformat(run["created_at"])).total_seconds()


def line(n: int, run: dict[str, Any], reads: tuple[int, int, int]) -> str:
    stats = run["stats"]
    return (
        f"  run {n:>3}: {stats['steps']:>4} steps, {stats['model_requests']:>4} model requests,"
        f" {stats['model_input_chars_total']:>9,} input chars, {seconds(run):6.2f} s;"
        f" read {reads[0]} passages, {reads[1]} analyst notes, {reads[2]} earlier runs' answers"
    )


def reads_of(api: Api, run: dict[str, Any], notes: set[str]) -> tuple[int, int, int]:
    """(passages, analyst notes, earlier runs' answers) the run read."""
    read = [r["ref"] for r in api.ledger(run["id"]) if r["stage"] == "read"]
    published = [r["id"] for r in read if r["kind"] == "publication"]
    return len(read) - len(published), sum(i in notes for i in published), sum(i not in notes for i in published)


def seed(api: Api) -> tuple[str, set[str]]:
    """A workspace of SOURCES PDFs and NOTES analyst notes; its id and the notes' ids."""
    ws = str(api.workspace(goal="Assess the liquidity risk of Fund X")["id"])
    for i in range(SOURCES):
        pages = [
            f"Source {i}, page {p}: Fund X met redemptions with {20 + i + p}% of its liquid assets." for p in range(2)
        ]
        api.upload(pdf(pages), f"fundx-{i}", f"fundx-{i}.pdf", ws)
    notes = set()
    for i in range(NOTES):
        body = f"Analyst note {i}: the redemption liquidity of Fund X is adequate for {30 + i} days. " * 5
        notes.add(api.publish(f"Fund X liquidity note {i}", body, ws)["id"])
    api.wait_catalog(ws, SOURCES + NOTES, timeout=120)
    return ws, notes


def run(api: Api, ws: str, n: int) -> dict[str, Any]:
    done = api.wait_run(api.start_run(ws, f"Day {n}: {QUESTION}")["id"], timeout=600)
    assert done["status"] == "completed", (n, done["error"], done.get("error_details"))
    return done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=30, help="the later run measured (at least 11)")
    last = max(parser.parse_args().runs, FIRST + 1)
    with tempfile.TemporaryDirectory(prefix="dossier-bench-history-") as tmp:
        stack = start_stack(Path(tmp) / "home")
        try:
            api = Api(stack)
            (young, notes), (old, old_notes) = seed(api), seed(api)
            notes |= old_notes
            first = run(api, young, 1)
            for n in range(1, last - 4):
                run(api, old, n)
            for n in range(2, FIRST - 4):
                run(api, young, n)
            # The five runs up to run 10 of the young workspace and up to the last of the old one, taken in
            # turn: whatever else the machine does then slows both alike.
            took: dict[str, list[float]] = {"young": [], "old": []}
            for k in range(5):
                early = run(api, young, FIRST - 4 + k)
                late = run(api, old, last - 4 + k)
                took["young"].append(seconds(early))
                took["old"].append(seconds(late))
            measured = {
                1: (first, reads_of(api, first, notes)),
                FIRST: (early, reads_of(api, early, notes)),
                last: (late, reads_of(api, late, notes)),
            }
        finally:
            stop_stack(stack.proc)
    print(
        f"extractive runs in a workspace of {SOURCES} sources and {NOTES} analyst notes, one after another"
        f" (runs {FIRST - 4}-{FIRST} of one workspace and {last - 4}-{last} of another, identical, taken in turn):"
    )
    for n, (done, reads) in measured.items():
        print(line(n, done, reads))
    early_stats, late_stats = measured[FIRST][0]["stats"], measured[last][0]["stats"]
    for name in ("steps", "model_requests", "model_input_chars_total"):
        print(f"  {name}: run {last} / run {FIRST} = {late_stats[name] / early_stats[name]:.2f}")
    early_s, late_s = statistics.median(took["young"]), statistics.median(took["old"])
    print(
        f"  seconds, median of five: runs {last - 4}-{last} {late_s:.2f} s / runs {FIRST - 4}-{FIRST} {early_s:.2f} s"
        f" = {late_s / early_s:.2f}"
    )
    goal(f"steps of run {last} / run {FIRST}", late_stats["steps"] / early_stats["steps"], GOAL_RATIO, at_most=True)
    goal(f"seconds of runs {last - 4}-{last} / runs {FIRST - 4}-{FIRST}", late_s / early_s, GOAL_RATIO, at_most=True)


if __name__ == "__main__":
    main()
