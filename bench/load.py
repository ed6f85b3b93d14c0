"""Gateway throughput and tail latency at 32 connections against a FastAPI floor, and RSS over a soak.

In one run, on a stack of its own:
1. wrk drives `GET /v1/publications/{id}/versions/1` on the gateway (`--workers` processes on its port,
   by default one per core), on `bench/_monolith.py` (what a user would build instead: one FastAPI app
   with as many workers, checking the token's hash and reading the version in one query on the stack's
   own PostgreSQL) and on `bench/_floor.py` (one uvicorn process answering the gateway's reply from
   memory), 32 connections each: the gateway and the monolith in three alternating turns of 10 s, so a
   change in what else the machine runs weighs on both, then the floor. Prints requests/s of each turn,
   the ratios (the goal: gateway ≥ 0.8× the monolith in the median turn) and the gateway's p99 ÷ p50,
   then the processor time per read of each process (bench/_cpu.py) and of wrk: on a 2-core machine it
   bounds the throughput any scheduling could reach.
2. The RSS of every service process before and after a sustained load of the same read at 32 connections
   (`--soak-seconds`, default 600: the issue's ten minutes; `BENCH_SOAK_SECONDS` sets the default).

wrk comes from the system (`apt-get install -y wrk`); without it an in-process httpx load generator stands
in and the output says so (its numbers are bounded by the generator, so compare them only to each other).
Run with `make bench` (or `.venv/bin/python bench/load.py --soak-seconds 60`). Never part of the test run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import _monolith as monolith
from bench._cpu import CpuMeter, print_split, stack_pids
from bench._stats import goal, publish, summary
from devstack.procs import free_port
from tests.support.stack import RunningStack, start_stack, stop_stack

ROOT = Path(__file__).resolve().parents[1]
CONNECTIONS = 32
SECONDS = 10
# Turns of the gateway's load and the monolith's, one after the other (see throughput).
ROUNDS = 3
UNITS = {"us": 1e-3, "ms": 1.0, "s": 1000.0}


@dataclass
class Load:
    rps: float
    p50_ms: float
    p99_ms: float
    errors: int
    tool: str


def _ms(text: str) -> float:
    match = re.fullmatch(r"([\d.]+)(us|ms|s)", text)
    if match is None:
        raise ValueError(f"unexpected wrk latency {text!r}")
    return float(match.group(1)) * UNITS[match.group(2)]


def wrk(url: str, token: str | None, seconds: int) -> Load:
    cmd = ["wrk", "-t2", f"-c{CONNECTIONS}", f"-d{seconds}s", "--latency", url]
    if token:
        cmd[1:1] = ["-H", f"Authorization: Bearer {token}"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    percentiles = dict(re.findall(r"^\s+(50|99)%\s+(\S+)$", out, re.MULTILINE))
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    socket_errors = re.search(r"Socket errors: (.*)", out)
    errors = int(bad.group(1)) if bad else 0
    if socket_errors:
        errors += sum(int(n) for n in re.findall(r"\d+", socket_errors.group(1)))
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    return Load(rps, _ms(percentiles["50"]), _ms(percentiles["99"]), errors, "wrk")


async def _httpx_load(url: str, token: str | None, seconds: int) -> Load:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    samples: list[float] = []
    errors = 0
    deadline = time.monotonic() + seconds
    limits = httpx.Limits(max_connections=CONNECTIONS, max_keepalive_connections=CONNECTIONS)
    async with httpx.AsyncClient(headers=headers, limits=limits, timeout=30) as client:

        async def worker() -> None:
            nonlocal errors
            while time.monotonic() < deadline:
                t = time.perf_counter()
                r = await client.get(url)
                samples.append((time.perf_counter() - t) * 1000)
                errors += r.status_code != 200

        started = time.monotonic()
        await asyncio.gather(*(worker() for _ in range(CONNECTIONS)))
        elapsed = time.monotonic() - started
    p50, p99 = summary(samples)
    return Load(len(samples) / elapsed, p50, p99, errors, "in-process httpx (wrk missing)")


def load(url: str, token: str | None, seconds: int) -> Load:
    if shutil.which("wrk"):
        return wrk(url, token, seconds)
    return asyncio.run(_httpx_load(url, token, seconds))


def start_app(app: str, env: dict[str, str], workers: int = 1) -> tuple[subprocess.Popen[bytes], str]:
    """A uvicorn app of bench/ on a free port, once it answers (any HTTP status will do)."""
    port = free_port()
    cmd = [sys.executable, "-m", "uvicorn", app, "--port", str(port), "--log-level", "warning"]
    proc = subprocess.Popen([*cmd, "--no-access-log", "--workers", str(workers)], cwd=ROOT, env=os.environ | env)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            httpx.get(f"{url}/v1/publications/x/versions/1")
            return proc, url
        except httpx.TransportError:
            time.sleep(0.1)
    proc.terminate()
    raise RuntimeError(f"{app} did not start")


def start_monolith(
    stack: RunningStack, token: str, document: dict[str, Any], workers: int
) -> tuple[subprocess.Popen[bytes], str]:
    dsn = stack.admin_dsn(monolith.DATABASE)
    asyncio.run(monolith.prepare(stack.admin_dsn(), dsn, token=token, scope="bench", document=document))
    return start_app("bench._monolith:app", {"BENCH_MONOLITH_DSN": dsn}, workers)


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def service_rss(stack: RunningStack) -> dict[str, float]:
    names = sorted(p.stem for p in (stack.home / "pids").glob("*.pid"))
    return {name: rss_mb(stack.pid(name)) for name in names}


@dataclass
class Metered:
    """Measured loads and the processor time they took: the meter's processes and the load generator's."""

    loads: list[Load]
    walls: list[float]
    spent: dict[str, float]
    exact: bool

    @property
    def wall(self) -> float:
        return sum(self.walls)

    @property
    def reads(self) -> float:
        return sum(r.rps * wall for r, wall in zip(self.loads, self.walls, strict=True))

    @property
    def rps(self) -> float:
        return self.reads / self.wall

    @property
    def errors(self) -> int:
        return sum(r.errors for r in self.loads)

    def print_split(self, name: str) -> None:
        print(f"  {name}:")
        print_split(self.spent, per=self.reads, unit="read, µs", scale=1e6, wall=self.wall, exact=self.exact)


def metered(meter: CpuMeter, names: set[str], url: str, token: str | None) -> Metered:
    """One load of SECONDS, with the processor time of the meter's processes in `names` and of wrk."""
    meter.start()
    generator = os.times()
    started = time.monotonic()
    result = load(url, token, SECONDS)
    wall = time.monotonic() - started
    spent = {name: seconds for name, seconds in meter.stop().items() if name in names}
    if result.tool == "wrk":
        # wrk is this process's child, reaped when it ends: its time is in ours.
        spent["(wrk)"] = sum(os.times()[2:4]) - sum(generator[2:4])
    return Metered([result], [wall], spent, meter.exact)


def combined(runs: list[Metered]) -> Metered:
    """Rounds of the same load as one: their reads, processor time and wall time summed."""
    spent: dict[str, float] = {}
    for run in runs:
        for name, seconds in run.spent.items():
            spent[name] = spent.get(name, 0.0) + seconds
    return Metered(
        [r for run in runs for r in run.loads],
        [w for run in runs for w in run.walls],
        spent,
        all(run.exact for run in runs),
    )


def print_load(name: str, r: Load) -> None:
    print(f"  {name:<18} {r.rps:7.0f} req/s   p50 {r.p50_ms:7.2f} ms   p99 {r.p99_ms:7.2f} ms   errors {r.errors}")


def throughput(stack: RunningStack, token: str, pub_id: str) -> None:
    path = f"/v1/publications/{pub_id}/versions/1"
    document = httpx.get(f"{stack.url}{path}", headers={"Authorization": f"Bearer {token}"}).json()
    workers = int(str(stack.state()["gateway_workers"]))
    floor_proc, floor_url = start_app("bench._floor:app", {"BENCH_FLOOR_JSON": json.dumps(document)})
    mono_proc, mono_url = start_monolith(stack, token, document, workers)
    pids = stack_pids(stack.local_home())
    gateway_rounds: list[Metered] = []
    mono_rounds: list[Metered] = []
    try:
        answer = httpx.get(f"{mono_url}{path}", headers={"Authorization": f"Bearer {token}"})
        if answer.status_code != 200 or answer.json() != document:
            raise SystemExit(f"the monolith does not answer as the gateway does: {answer.status_code} {answer.text}")
        load(f"{stack.url}{path}", token, 3)  # warm all three before measuring
        load(f"{mono_url}{path}", token, 3)
        load(f"{floor_url}{path}", None, 3)
        # The gateway and the monolith in turns, so a change in what else the machine runs weighs on both.
        with CpuMeter({**pids, "monolith": mono_proc.pid}) as meter:
            for _ in range(ROUNDS):
                gateway_rounds.append(metered(meter, set(pids), f"{stack.url}{path}", token))
                mono_rounds.append(metered(meter, {"monolith", "postgres"}, f"{mono_url}{path}", token))
        with CpuMeter({"floor": floor_proc.pid}) as meter:
            floor_run = metered(meter, {"floor"}, f"{floor_url}{path}", None)
    finally:
        for proc in (floor_proc, mono_proc):
            proc.terminate()
            proc.wait(10)
    gateway, mono = combined(gateway_rounds), combined(mono_rounds)
    print(
        f"{CONNECTIONS} connections, load by {gateway.loads[0].tool}; {workers} gateway worker(s);"
        f" the gateway and the monolith in {ROUNDS} turns of {SECONDS} s each, then the floor for {SECONDS} s"
    )
    for i, (g, m) in enumerate(zip(gateway.loads, mono.loads, strict=True), start=1):
        print_load(f"gateway, turn {i}", g)
        print_load(f"monolith, turn {i}", m)
    print_load("FastAPI floor", floor_run.loads[0])
    gateway.print_split("gateway, all turns")
    mono.print_split("monolith, all turns (its own PostgreSQL time beside it)")
    floor_run.print_split("FastAPI floor")
    if gateway.errors or mono.errors or floor_run.errors:
        raise SystemExit("non-2xx answers or socket errors under load: the numbers are not valid")
    ratios = [g.rps / m.rps for g, m in zip(gateway.loads, mono.loads, strict=True)]
    print("  gateway ÷ monolith by turn: " + ", ".join(f"{x:.2f}" for x in ratios))
    goal("gateway throughput ÷ monolith (32 connections, median turn)", statistics.median(ratios), 0.8, at_most=False)
    goal("gateway throughput ÷ FastAPI floor (32 connections)", gateway.rps / floor_run.rps, 1.0, at_most=False)
    tails = [g.p99_ms / g.p50_ms for g in gateway.loads]
    goal("gateway p99 ÷ p50 (32 connections, median turn)", statistics.median(tails), 3, at_most=True)


def soak(stack: RunningStack, token: str, pub_id: str, seconds: int) -> None:
    url = f"{stack.url}/v1/publications/{pub_id}/versions/1"
    before = service_rss(stack)
    peak = dict(before)
    served = 0.0
    left = seconds
    while left > 0:
        chunk = min(60, left)
        r = load(url, token, chunk)
        served += r.rps * chunk
        if r.errors:
            raise SystemExit(f"{r.errors} errors during the soak")
        peak = {k: max(v, rss_mb(stack.pid(k))) for k, v in peak.items()}
        left -= chunk
    after = service_rss(stack)
    print(f"\nRSS over a {seconds} s soak at {CONNECTIONS} connections ({served:,.0f} reads through the gateway)")
    for name in before:
        growth = after[name] - before[name]
        print(
            f"  {name:<12} before {before[name]:7.1f} MB   after {after[name]:7.1f} MB   peak {peak[name]:7.1f} MB"
            f"   growth {growth:+6.1f} MB"
        )
    worst = max(after[n] / before[n] for n in before)
    goal(f"largest RSS after ÷ before ({seconds} s soak)", worst, 1.1, at_most=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    default_soak = int(os.environ.get("BENCH_SOAK_SECONDS", "600"))
    parser.add_argument("--soak-seconds", type=int, default=default_soak, help="sustained load for the RSS check")
    parser.add_argument("--workers", type=int, help="DOSSIER_GATEWAY_WORKERS (default: the cores)")
    args = parser.parse_args()
    # One token drives every connection: its rate (still checked on every request) must not be the bound.
    env = {"DOSSIER_RATE_PER_TOKEN": "1000000", "DOSSIER_RATE_BURST": "1000000"}
    if args.workers:
        env["DOSSIER_GATEWAY_WORKERS"] = str(args.workers)
    with tempfile.TemporaryDirectory(prefix="dossier-bench-") as tmp:
        stack = start_stack(Path(tmp) / "home", extra_env=env)
        try:
            token = stack.token("bench")
            pub = publish(stack.url, token)
            throughput(stack, token, pub["id"])
            if args.soak_seconds > 0:
                soak(stack, token, pub["id"], args.soak_seconds)
        finally:
            stop_stack(stack.proc)


if __name__ == "__main__":
    main()
