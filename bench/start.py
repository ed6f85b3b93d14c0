"""How long `make up` takes to answer healthy on a home that is already initialised.

The first start on a new home creates the databases, the credentials and the stream store; every start
after it finds them. This starts the stack once to initialise a home, stops it, then starts it `--runs`
times more on that home (the supervisor, `python -m devstack.stack`, as `make up` runs it) and reports the
seconds from the command to its `Dossier is up` line, and each phase of the start as the supervisor's
`--timings` lines name it. Run with `.venv/bin/python bench/start.py`; never part of the test run.

`--imports` measures instead what a start's processes spend importing their code, each in a fresh
interpreter as the stack starts it (the project's bytecode compiled first, as `make up` does): each
process's import, the part of it that is third-party libraries (pydantic, FastStream, nats, asyncpg, the
MinIO client, ...), and all of those libraries imported once. A start imports them again in every process;
the difference is what a design that imported them once and forked each service from there would save.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import statistics
import subprocess
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


# What each process of a start imports before it waits for the servers (its entry point's imports).
ENTRY_IMPORTS = {
    "gateway": ["uvicorn", "services.gateway.app", "services.gateway.transport.protocol"],
    **{
        name: [f"services.{name}.app", "shared.runtime", "shared.settings"]
        for name in ("workspace", "runhost", "publication", "artifact", "assets")
    },
    "outside": ["shared.consumerguard"],
}
IMPORT_PROBE = """
import json, sys, time
modules = json.loads(sys.argv[1])
before = set(sys.modules)
began = time.process_time()
for name in modules:
    __import__(name)
spent = time.process_time() - began
packages = sorted({m.split(".")[0] for m in set(sys.modules) - before})
print(json.dumps({"seconds": spent, "packages": packages}))
"""


def import_cost(modules: list[str]) -> tuple[float, set[str]]:
    """Processor seconds a fresh interpreter spends importing `modules` (the median of three), and the
    top-level packages they brought in."""
    env = os.environ | {"PYTHONDONTWRITEBYTECODE": "1"}
    runs = []
    for _ in range(3):
        out = subprocess.run(
            [sys.executable, "-c", IMPORT_PROBE, json.dumps(modules)], env=env, capture_output=True, check=True
        )
        runs.append(json.loads(out.stdout))
    return statistics.median(r["seconds"] for r in runs), set(runs[0]["packages"])


def libraries(packages: set[str]) -> list[str]:
    """The third-party packages among `packages`: importable by name, neither the project's nor the stdlib's."""
    ours = {"services", "shared", "devstack", "dossier_cli"}
    names = packages - ours - set(sys.stdlib_module_names) - set(sys.builtin_module_names)
    return sorted(n for n in names if not n.startswith("_") and n != "cython_runtime" and importlib.util.find_spec(n))


def imports(gateway_workers: int) -> None:
    subprocess.run(["make", "-s", "bytecode"], cwd=Path(__file__).resolve().parents[1], check=True)
    costs = {name: import_cost(modules) for name, modules in ENTRY_IMPORTS.items()}
    counts = {name: gateway_workers if name == "gateway" else 1 for name in costs}
    own = {name: libraries(packages) for name, (_, packages) in costs.items()}
    theirs = {name: import_cost(own[name])[0] for name in costs}
    union = sorted(set().union(*own.values()))
    once, _ = import_cost(union)
    total = sum(costs[name][0] * n for name, n in counts.items())
    repeated = sum(theirs[name] * n for name, n in counts.items())
    for name, (seconds, _) in costs.items():
        print(
            f"import {name:<12} x{counts[name]}  {seconds:6.3f} s each, of it third-party libraries {theirs[name]:6.3f} s"
        )
    print(f"every process's imports at a start                      {total:6.2f} s of processor time")
    print(f"  of it the libraries, imported by each process again   {repeated:6.2f} s")
    print(f"  all {len(union)} of those libraries imported once            {once:6.2f} s")
    print(
        f"  so a start importing them once and forking the processes from there would save about {repeated - once:.2f} s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3, help="starts measured after the initialising one")
    parser.add_argument("--imports", action="store_true", help="what each process imports, instead of starts")
    parser.add_argument("--gateway-workers", type=int, default=len(os.sched_getaffinity(0)))
    args = parser.parse_args()
    if args.imports:
        imports(args.gateway_workers)
        return
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
