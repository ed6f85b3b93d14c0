"""How long `make up` takes to answer healthy on a home that is already initialised.

The first start on a new home creates the databases, the credentials and the stream store; every start
after it finds them. This starts the stack once to initialise a home, stops it, then starts it `--runs`
times more on that home (the supervisor, `python -m devstack.stack`, as `make up` runs it) and reports the
seconds from the command to its `Dossier is up` line, and each phase of the start as the supervisor's
`--timings` lines name it. Run with `.venv/bin/python bench/start.py`; never part of the test run.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._stats import goal
from tests.support.stack import start_stack, stop_stack

GOAL_SECONDS = 4.0
TIMING = re.compile(r"^dossier: start: (.+?) at ([\d.]+) s$", re.MULTILINE)


def one_start(home: Path) -> tuple[float, dict[str, float]]:
    offset = (home / "stack.out").stat().st_size if (home / "stack.out").exists() else 0
    started = time.perf_counter()
    stack = start_stack(home, extra_env={"DOSSIER_START_TIMINGS": "1"})
    elapsed = time.perf_counter() - started
    stop_stack(stack.proc)  # type: ignore[arg-type]
    output = (home / "stack.out").read_text()[offset:]
    return elapsed, {phase: float(at) for phase, at in TIMING.findall(output)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3, help="starts measured after the initialising one")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="dossier-bench-") as tmp:
        home = Path(tmp) / "home"
        first, _ = one_start(home)
        print(f"first start (a new home)        {first:6.2f} s")
        runs = []
        for n in range(args.runs):
            seconds, phases = one_start(home)
            runs.append(seconds)
            steps = "  ".join(f"{phase} {at:.2f}" for phase, at in phases.items())
            print(f"start {n + 1} (initialised home)    {seconds:6.2f} s   {steps}")
    goal("start to healthy, initialised home (median)", statistics.median(runs), GOAL_SECONDS, at_most=True, unit=" s")


if __name__ == "__main__":
    main()
