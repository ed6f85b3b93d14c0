"""Seconds from `POST /v1/runs/{id}/cancel` to the run's `cancelled` state while its model request
trickles, against a one-request run's whole time (POST to `completed`) measured in the same run.

The fake OpenAI-compatible server (tests/support/fake_openai.py, its own process) holds the request
open: a whole reply whose bytes come one a second, or, with `DOSSIER_OPENAI_STREAM=true`, a stream that
sends a piece of text twice a second. Without the cancel watcher only the two-minute whole-request deadline
would end it. Each cancel is sent at a random moment after the request arrived, so it lands anywhere in
the watcher's one-second poll. Starts its own stacks in a temporary folder, prints, stops them.
Never part of the test run.
"""

from __future__ import annotations

import random
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx

from bench._stats import goal
from tests.support.api import Api, probe
from tests.support.fake_openai import running as fake_openai_server
from tests.support.stack import start_stack, stop_stack

ROUNDS = 8
GOAL_SECONDS = 3.0  # "within a few seconds"
DEADLINE_SECONDS = 120.0  # DOSSIER_OPENAI_TIMEOUT_SECONDS: what ended such a request before the watcher


def requests_of(url: str, question: str) -> list[dict[str, Any]]:
    return [r for r in httpx.get(f"{url}/requests").json() if r["task"] and question in r["task"]]


def one_request_run(api: Api, ws: str) -> float:
    """Seconds from POST to `completed` of a run whose model calls `finish` at its first request."""
    started = time.perf_counter()
    run = api.start_run(ws, f"scenario:quick {uuid.uuid4().hex[:8]}", model="openai")
    probe(lambda: api.run(run["id"])["status"] == "completed", timeout=60, interval=0.02)
    return time.perf_counter() - started


def cancel_latency(api: Api, ws: str, model_url: str, streamed: bool) -> float:
    question = f"scenario:trickle {uuid.uuid4().hex[:8]}"
    run = api.start_run(ws, question, model="openai")
    if streamed:
        probe(lambda: (requests_of(model_url, question) or [{}])[0].get("chunks", 0) >= 2, timeout=60, interval=0.02)
    else:
        probe(lambda: requests_of(model_url, question), timeout=60, interval=0.02)
    time.sleep(random.uniform(0.0, 1.0))
    started = time.perf_counter()
    api.ok("POST", f"/v1/runs/{run['id']}/cancel")
    probe(lambda: api.run(run["id"])["status"] == "cancelled", timeout=DEADLINE_SECONDS, interval=0.02)
    return time.perf_counter() - started


def measure(home: Path, model_url: str, streamed: bool) -> tuple[list[float], list[float]]:
    env = {
        "DOSSIER_MODEL": "openai",
        "DOSSIER_OPENAI_BASE_URL": f"{model_url}/v1",
        "DOSSIER_OPENAI_MODEL": "fake-bench",
        "DOSSIER_OPENAI_STREAM": "true" if streamed else "false",
    }
    stack = start_stack(home, extra_env=env)
    try:
        api = Api(stack)
        ws = str(api.workspace()["id"])
        one_request_run(api, ws)  # warm-up: first connections, first statements
        baseline = [one_request_run(api, ws) for _ in range(ROUNDS)]
        cancels = [cancel_latency(api, ws, model_url, streamed) for _ in range(ROUNDS)]
        return baseline, cancels
    finally:
        stop_stack(stack.proc)


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="dossier-bench-cancel-") as tmp, fake_openai_server() as url:
        results = {streamed: measure(Path(tmp) / f"stream-{streamed}", url, streamed) for streamed in (False, True)}
    for streamed, (baseline, cancels) in results.items():
        kind = "a streamed reply" if streamed else "a whole reply"
        base, median, worst = statistics.median(baseline), statistics.median(cancels), max(cancels)
        print(
            f"model request trickling {kind}: cancel → cancelled median {median:.2f} s, max {worst:.2f} s"
            f" (n={len(cancels)}); a one-request run, POST → completed, median {base:.2f} s;"
            f" ratio {median / base:.1f}x; the whole-request deadline it replaces: {DEADLINE_SECONDS:.0f} s"
        )
        goal(f"cancel mid-request, {kind} (max seconds)", worst, GOAL_SECONDS, at_most=True, unit=" s")


if __name__ == "__main__":
    main()
