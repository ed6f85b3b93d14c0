"""Runs under faults, on a stack with short leases and paced steps: crash resume, plan edits, cancel,
limits, an invalid checkpoint proposal, and the openai policy against a fake OpenAI-compatible server."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from tests.support.api import Api, probe
from tests.support.compose import compose_stack_url
from tests.support.stack import ROOT, RunningStack, alive, stack_running

SCRIPTS = {
    # Writes the recited plan into draft.md at every step: shows what each step saw.
    "echo-plan": [{"name": "write_draft", "arguments": {"text": "{plan}"}} for _ in range(200)],
    # Ten slow steps, then an answer with a proposal: time for the workspace to be deleted mid-run.
    "slow-finish": [{"name": "write_draft", "arguments": {"text": "draft"}} for _ in range(10)]
    + [{"name": "finish", "arguments": {"answer": "# late answer\n", "checkpoint_proposal": {"summary": "s"}}}],
    "bad-proposal": [{"name": "finish", "arguments": {"answer": "# done\n", "checkpoint_proposal": {"summary": ""}}}],
    # Thirty paced draft writes, then an answer: long enough to pause a worker in the middle.
    "stale-draft": [{"name": "write_draft", "arguments": {"text": f"draft {i}"}} for i in range(30)]
    + [{"name": "finish", "arguments": {"answer": "# fenced answer\n", "checkpoint_proposal": {"summary": "f"}}}],
    # The same, each draft after a note of a new name: a file indexed for the first time takes a lock on its
    # run's row (the index's key to the run) inside the transaction that indexes it, which the frozen-worker
    # test needs to catch. (A count or a draft written again holds none: its statement is its transaction.)
    "frozen-notes": [
        step
        for i in range(30)
        for step in (
            {"name": "write_note", "arguments": {"source": f"s{i}", "text": f"note {i}"}},
            {"name": "write_draft", "arguments": {"text": f"draft {i}"}},
        )
    ]
    + [{"name": "finish", "arguments": {"answer": "# fenced answer\n", "checkpoint_proposal": {"summary": "f"}}}],
    # Arguments of the wrong type, as models send them; each is answered back and the run goes on.
    "wrong-types": [
        {"name": "read_publication", "arguments": {"id": "pub_x", "version": "x"}},
        {"name": "search_evidence", "arguments": {"query": None}},
        {"name": "read_file", "arguments": {"path": "plan.md", "offset": "x", "limit": None}},
        {"name": "write_note", "arguments": {"source": 5, "text": ["a"]}},
        {"name": "write_draft", "arguments": {"text": {"a": 1}}},
        {"name": "read_evidence", "arguments": {"evidence_id": "ev", "extra": True}},
        {"name": "finish", "arguments": {"answer": 42}},
        {"name": "write_draft", "arguments": {"text": "recovered"}},
        {"name": "finish", "arguments": {"answer": "# answered after seven bad calls\n"}},
    ],
}


def published_once(api: Api, workspace_id: str, run: dict[str, Any]) -> None:
    """The finished run's publication has one version, and its workspace's catalog lists one of the run's."""
    assert api.ok("GET", f"/v1/publications/{run['publication']['id']}")["latest_version"] == 1
    catalog = api.ok("GET", f"/v1/workspaces/{workspace_id}/catalog?limit=200")
    assert len([i for i in catalog["items"] if i["kind"] == "publication" and i["run_id"] == run["id"]]) == 1


@pytest.fixture(scope="module")
def scripts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder of slow_stack's scripted policies; a test may add one (`scripted:<name>`) before its run."""
    return tmp_path_factory.mktemp("scripts")


@pytest.fixture(scope="module")
def slow_stack(scripts: Path, dossier_homes: Callable[[str], Path], model_server: str) -> Iterator[RunningStack]:
    for name, steps in SCRIPTS.items():
        (scripts / f"{name}.json").write_text(json.dumps(steps))
    env = {
        "DOSSIER_RUN_LEASE_SECONDS": "3",
        # An external run whose lease stays expired this long fails as abandoned (the default is a day).
        "DOSSIER_EXTERNAL_ABANDON_SECONDS": "2",
        "DOSSIER_RUN_STEP_DELAY_SECONDS": "0.1",
        "DOSSIER_SCRIPTS_DIR": str(scripts),
        "DOSSIER_OPENAI_BASE_URL": f"{model_server}/v1",
        "DOSSIER_OPENAI_MODEL": "fake-model",
        "DOSSIER_OPENAI_API_KEY": "sk-test",
        "DOSSIER_OPENAI_BACKOFF_SECONDS": "0.1",
    }
    with stack_running(dossier_homes("slow-home"), extra_env=env) as running:
        yield running


@pytest.fixture(scope="module")
def crash_stack(request: pytest.FixtureRequest) -> RunningStack:
    """The compose stack under `make test-containers` (its run host has the same short leases, and paced
    steps for the tests marked `paced`: deploy/containers/test-stack.yml), else slow_stack. The other tests here need the scripted
    policies or the fake OpenAI server on this host, so they run on slow_stack alone (`local_stack`)."""
    return request.getfixturevalue("stack" if compose_stack_url() else "slow_stack")  # type: ignore[no-any-return]


@pytest.mark.paced
def test_crash_resume_reads_each_of_30_sources_once(crash_stack: RunningStack) -> None:
    api = Api(crash_stack)
    ws = api.workspace(goal="Assess the liquidity of Fund X")
    for i in range(30):
        api.publish(f"Fund X liquidity report {i:02d}", f"Report {i}: Fund X liquidity finding number {i}.", ws["id"])
    api.wait_catalog(ws["id"], 30)
    run = api.start_run(ws["id"], "What do the Fund X liquidity reports conclude?")
    notes = probe(
        lambda: (n := sum(p.startswith("notes/") for p in api.files(run["id"]))) >= 18 and n, timeout=120, interval=0.05
    )
    crash_stack.kill("runhost")
    assert notes < 30, "the run finished before the crash; the test proves nothing"

    run = api.wait_run(run["id"], timeout=180)
    assert run["status"] == "completed", run["error"]
    ledger = api.ledger(run["id"])
    reads = [(r["ref"]["id"], r["ref"]["version"]) for r in ledger if r["stage"] == "read"]
    assert len(reads) == 30 and len(set(reads)) == 30
    answer = api.read(run["publication"])
    assert len(answer["sources"]) == 30
    published_once(api, ws["id"], run)


def drafting(api: Api, question: str, model: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A new workspace, and a run in it (of a scripted, paced model) that has written its first draft."""
    ws = api.workspace()
    run = api.start_run(ws["id"], question, model=model)
    probe(lambda: "draft.md" in api.files(run["id"]))
    return ws, run


@pytest.mark.local_stack
def test_plan_edit_mid_run_is_recited_at_the_next_step_and_cancel_stops_the_run(slow_stack: RunningStack) -> None:
    api = Api(slow_stack)
    _, run = drafting(api, "Echo the plan", "scripted:echo-plan")
    marker = "EDITED-BY-A-PERSON-7d1f"
    api.ok(
        "PUT",
        f"/v1/runs/{run['id']}/files/plan.md",
        content=f"# Plan\n\n## Focus\n{marker}\n".encode(),
        headers={"content-type": "text/plain"},
    )
    probe(lambda: marker in api.ok("GET", f"/v1/runs/{run['id']}/files/draft.md"), timeout=30)

    cancelled = api.ok("POST", f"/v1/runs/{run['id']}/cancel")
    assert cancelled["id"] == run["id"]
    run = api.wait_run(run["id"])
    assert run["status"] == "cancelled" and run["publication"] is None and run["finished_at"]
    r = api.http.put(f"/v1/runs/{run['id']}/files/plan.md", content=b"late", headers={"content-type": "text/plain"})
    assert r.status_code == 409
    again = api.ok("POST", f"/v1/runs/{run['id']}/cancel")
    assert again["status"] == "cancelled"


@pytest.mark.local_stack
def test_plan_upload_rules(slow_stack: RunningStack) -> None:
    api = Api(slow_stack)
    ws = api.workspace()
    run = api.start_run(ws["id"], "Echo the plan", model="scripted:echo-plan")
    path = f"/v1/runs/{run['id']}/files/plan.md"
    assert api.http.put(path, content=b"x" * (64 * 1024 + 1), headers={"content-type": "text/plain"}).status_code == 413
    assert api.http.put(path, content=b"\xff\xfe", headers={"content-type": "text/plain"}).status_code == 422
    assert api.http.put(path, json={"plan": "x"}).status_code == 422
    assert api.http.get(f"/v1/runs/{run['id']}/files/../../etc/passwd").status_code in (404, 422)
    api.ok("POST", f"/v1/runs/{run['id']}/cancel")
    assert api.wait_run(run["id"])["status"] == "cancelled"


@pytest.mark.local_stack
@pytest.mark.parametrize(
    ("limits", "limit", "value"),
    [
        ({"max_steps": 5}, "max_steps", 5),
        ({"max_model_requests": 5}, "max_model_requests", 5),
        # About a second of paced steps: the run is well into its sources, and far from its finish.
        ({"max_seconds": 1.0}, "max_seconds", 1.0),
    ],
)
def test_a_run_stopped_at_a_limit_fails_saying_which_publishes_nothing_and_keeps_its_files(
    slow_stack: RunningStack, limits: dict[str, float], limit: str, value: float
) -> None:
    api = Api(slow_stack)
    ws = api.workspace()
    for i in range(3):
        api.publish(f"Fund X liquidity report {i}", f"Finding {i} on Fund X liquidity.", ws["id"])
    api.wait_catalog(ws["id"], 3)
    run = api.wait_run(api.start_run(ws["id"], "What do the Fund X liquidity reports conclude?", limits=limits)["id"])
    assert (run["status"], run["error"], run["error_details"]) == (
        "failed",
        "limit_reached",
        {"limit": limit, "value": value},
    )
    assert run["publication"] is None and run["finished_at"]
    # What it read and noted stays, to be looked at; nothing of it reaches the workspace.
    files = api.files(run["id"])
    assert "plan.md" in files
    read = (sum(p.startswith("sources/") for p in files), sum(r["stage"] == "read" for r in api.ledger(run["id"])))
    noted = sum(p.startswith("notes/") for p in files)
    if limit == "max_steps":
        # list, search, plan, then one reply reading two of the three sources: the two steps left, not three.
        assert (read, noted, run["stats"]["steps"], run["stats"]["model_requests"]) == ((2, 2), 0, 5, 4)
    if limit == "max_model_requests":
        # list, search, plan, one reply reading the three sources, one reading their files; the sixth, to note
        # them, is never asked.
        assert (read, noted) == ((3, 3), 0)
    catalog = api.ok("GET", f"/v1/workspaces/{ws['id']}/catalog?limit=200")["items"]
    assert [i for i in catalog if i["run_id"] == run["id"]] == []


@pytest.mark.local_stack
def test_invalid_checkpoint_proposal_never_fails_the_run(slow_stack: RunningStack) -> None:
    api = Api(slow_stack)
    ws = api.workspace()
    run = api.wait_run(api.start_run(ws["id"], "anything", model="scripted:bad-proposal")["id"])
    assert run["status"] == "completed"
    assert run["checkpoint_proposal"]["status"] == "invalid"


@pytest.mark.local_stack
def test_openai_policy_against_a_fake_server(slow_stack: RunningStack, model_server: str) -> None:
    api = Api(slow_stack)
    ws = api.workspace()
    api.publish("Fund X liquidity report", "Fund X liquidity is adequate.", ws["id"])
    api.wait_catalog(ws["id"], 1)
    run = api.wait_run(api.start_run(ws["id"], "What holds?", model="openai")["id"])
    assert run["status"] == "completed", run["error"]
    assert run["checkpoint_proposal"]["status"] == "applied"
    requests = httpx.get(f"{model_server}/requests").json()
    assert len(requests) == 4, "one 429 retried, then three model steps"
    first = requests[0]["body"]
    assert requests[0]["auth"] == "Bearer sk-test"
    assert first["stream"] is False and first["model"] == "fake-model"
    assert {t["function"]["name"] for t in first["tools"]} >= {"list_catalog", "read_publication", "finish"}
    assert first["messages"][-1]["content"].startswith("Current plan (plan.md, recited):")
    error_turn = requests[3]["body"]["messages"][-2]
    assert error_turn["role"] == "tool" and "not a JSON object" in error_turn["content"]
    ledger = api.ledger(run["id"])
    assert {r["stage"] for r in ledger} == {"listed"}


@pytest.mark.local_stack
def test_a_version_withdrawn_mid_run_is_refused_from_the_runs_copy_and_is_no_source(
    slow_stack: RunningStack, scripts: Path
) -> None:
    """A run reads A and B, both are withdrawn while it drafts; it reads A again (its copy, then its file):
    refused, `unavailable` rows. Its answer cites both: published, but neither is a source or supports it."""
    api = Api(slow_stack)
    ws = api.workspace()
    a = api.publish("Report A", "Fund X can meet redemptions within 30 days.", ws["id"])
    b = api.publish("Report B", "Fund X liquidity is inadequate under stress.", ws["id"])
    api.wait_catalog(ws["id"], 2)
    copy = f"sources/{a['id']}@v1.txt"
    answer = f"- Fund X can meet redemptions within 30 days ({a['id']}@v1).\n- Under stress it cannot ({b['id']}@v1).\n"
    steps = [
        {"name": "read_publication", "arguments": {"id": a["id"], "version": 1}},
        {"name": "read_publication", "arguments": {"id": b["id"], "version": 1}},
        *({"name": "write_draft", "arguments": {"text": f"draft {i}"}} for i in range(30)),
        {"name": "read_publication", "arguments": {"id": a["id"], "version": 1}},
        {"name": "read_file", "arguments": {"path": copy}},
        {"name": "finish", "arguments": {"answer": answer}},
    ]
    name = f"withdrawn-{uuid.uuid4().hex[:8]}"
    (scripts / f"{name}.json").write_text(json.dumps(steps))
    run = api.start_run(ws["id"], "What do A and B say?", model=f"scripted:{name}")

    def both_read() -> bool:
        return len([r for r in api.ledger(run["id"]) if r["stage"] == "read"]) == 2

    probe(both_read, timeout=60, interval=0.02)
    for pub in (a, b):
        api.ok("POST", f"/v1/publications/{pub['id']}/versions/1/withdraw", json={"reason": "retracted"})
    draft = api.http.get(f"/v1/runs/{run['id']}/files/draft.md")
    assert draft.status_code == 404 or "draft 29" not in draft.text, "withdrawn too late to prove anything"

    run = api.wait_run(run["id"])
    assert run["status"] == "completed", run["error"]
    ledger = api.ledger(run["id"])
    refused = [(r["ref"]["id"], r["reason"]) for r in ledger if r["stage"] == "unavailable"]
    # A's read again and the read of its file are one row (a run's ledger holds each stage, ref and locator
    # once), then B when the answer was kept.
    assert refused == [(a["id"], "withdrawn"), (b["id"], "withdrawn")]
    published = api.read(run["publication"])
    assert published["sources"] == []
    assert run["stats"]["claims_supported"] == 0 and run["stats"]["claims_unsupported"] == 2


@pytest.mark.local_stack
def test_a_run_finishing_after_its_workspace_was_deleted_publishes_but_is_refused(slow_stack: RunningStack) -> None:
    api = Api(slow_stack)
    ws = api.workspace()
    run = api.start_run(ws["id"], "late", model="scripted:slow-finish")
    probe(lambda: api.run(run["id"])["status"] == "running")
    api.ok("DELETE", f"/v1/workspaces/{ws['id']}")
    run = api.wait_run(run["id"])
    assert run["status"] == "completed", run["error"]
    assert run["workspace_association"] == "refused"
    assert run["checkpoint_proposal"]["status"] in ("invalid", "stale")
    assert api.read(run["publication"])["body"] == "# late answer"
    assert api.http.get(f"/v1/workspaces/{ws['id']}/runs").status_code == 404


def lease_epoch(stack: RunningStack, run_id: str) -> int:
    async def fetch() -> int:
        conn = await asyncpg.connect(stack.dsn("runhost"))
        try:
            return int(await conn.fetchval("SELECT lease_epoch FROM runs WHERE id = $1", run_id))
        finally:
            await conn.close()

    return asyncio.run(fetch())


def stood_down(stack: RunningStack, run_id: str) -> bool:
    """The first worker's attempt ended: its heartbeat found the lease gone, a fenced write was refused, or
    (when it was stopped inside a transaction, which PostgreSQL then ended) its session was gone."""
    text = (stack.home / "logs" / "runhost.log").read_text()
    said = ("lease epoch 1 lost", "a newer worker owns the run", "this attempt lost its database session")
    return any(f"run {run_id}: {words}" in text for words in said)


@contextlib.contextmanager
def second_runhost(stack: RunningStack) -> Iterator[subprocess.Popen[bytes]]:
    """Another run host beside the stack's own, stopped at the end."""
    with open(stack.home / "logs" / "runhost-second.log", "ab") as log:
        second = subprocess.Popen(
            [sys.executable, "-m", "services.runhost"],
            cwd=ROOT,
            env=stack.service_env("runhost"),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            yield second
        finally:
            second.terminate()
            second.wait(30)


def fenced_run_completed(api: Api, ws: dict[str, Any], run: dict[str, Any]) -> None:
    """The stale-draft (or frozen-notes) run ended as one worker would have ended it."""
    done = api.wait_run(run["id"], timeout=120)
    assert done["status"] == "completed", done["error"]
    assert api.ok("GET", f"/v1/runs/{run['id']}/files/draft.md") == "draft 29"
    assert api.ok("GET", f"/v1/runs/{run['id']}/files/plan.md").startswith(f"# Plan of run {run['id']}")
    assert api.read(done["publication"])["body"] == "# fenced answer"
    published_once(api, ws["id"], done)
    assert done["checkpoint_proposal"]["status"] == "applied"


@pytest.mark.local_stack
def test_a_stale_worker_cannot_overwrite_files_or_break_the_publish(slow_stack: RunningStack) -> None:
    """SIGSTOP the runhost past its lease, let a second runhost take the run over, SIGCONT the first."""
    api = Api(slow_stack)
    ws, run = drafting(api, "Fence me", "scripted:stale-draft")
    victim = slow_stack.pid("runhost")
    os.kill(victim, signal.SIGSTOP)
    try:
        with second_runhost(slow_stack):
            probe(lambda: lease_epoch(slow_stack, run["id"]) >= 2, timeout=60)
            os.kill(victim, signal.SIGCONT)
            fenced_run_completed(api, ws, run)
            # The stale worker woke, found its lease gone and stood down without dying.
            probe(lambda: stood_down(slow_stack, run["id"]))
            assert slow_stack.pid("runhost") == victim and alive(victim)
    finally:
        os.kill(victim, signal.SIGCONT)


def no_unexpected_failure(stack: RunningStack, run_id: str) -> None:
    """No attempt of the run took a lost database session for a fault of its own."""
    log = (stack.home / "logs" / "runhost.log").read_text().splitlines()
    unexpected = [line for line in log if f"run {run_id} failed unexpectedly" in line]
    assert not unexpected, unexpected[0]


def stop_holding_the_run(stack: RunningStack, pid: int, run_id: str) -> int | None:
    """SIGSTOP `pid` at a moment when one of its sessions holds the run's row inside a transaction (stop,
    look, go on, again until so); returns that session's backend pid, or None when the run ended first."""

    async def catch() -> int | None:
        conn = await asyncpg.connect(stack.admin_dsn("runhost"))
        try:
            for attempt in range(3000):
                os.kill(pid, signal.SIGSTOP)
                await asyncio.sleep(0.02)  # a statement the server was running ends meanwhile
                backend = await conn.fetchval(
                    "SELECT a.pid FROM pg_stat_activity a JOIN runs r ON r.xmax = a.backend_xid"
                    " WHERE r.id = $1 AND a.state = 'idle in transaction'",
                    run_id,
                )
                if backend is not None:
                    return int(backend)
                os.kill(pid, signal.SIGCONT)
                if await conn.fetchval("SELECT status FROM runs WHERE id = $1", run_id) != "running":
                    return None
                await asyncio.sleep(0.001 * (attempt % 7))
            raise AssertionError("the worker was never caught inside a transaction holding its run")
        finally:
            await conn.close()

    return asyncio.run(catch())


def frozen_holding_its_run(stack: RunningStack, api: Api) -> tuple[dict[str, Any], dict[str, Any], int]:
    """A drafting run whose worker is stopped inside a transaction holding the run's row (and that session's
    backend pid). A run gives thirty such transactions, each short: on a loaded machine all of them can pass
    between two looks, so a run that ends uncaught is followed by another, in a workspace of its own."""
    for _ in range(3):
        ws, run = drafting(api, "Freeze me", "scripted:frozen-notes")
        backend = stop_holding_the_run(stack, stack.pid("runhost"), run["id"])
        if backend is not None:
            return ws, run, backend
    raise AssertionError("three runs ended before their worker was caught inside a transaction holding the run")


def session_alive(stack: RunningStack, backend: int) -> bool:
    async def look() -> bool:
        conn = await asyncpg.connect(stack.admin_dsn())
        try:
            return bool(await conn.fetchval("SELECT count(*) FROM pg_stat_activity WHERE pid = $1", backend))
        finally:
            await conn.close()

    return asyncio.run(look())


@pytest.mark.local_stack
@pytest.mark.waits
def test_a_worker_frozen_inside_a_transaction_holding_its_run_lets_the_next_take_it_over(
    slow_stack: RunningStack,
) -> None:
    """The row a frozen worker locked is let go when PostgreSQL ends its session (30 s idle inside a
    transaction): the takeover does not wait for the frozen process to die."""
    api = Api(slow_stack)
    victim = slow_stack.pid("runhost")
    ws, run, backend = frozen_holding_its_run(slow_stack, api)
    try:
        with second_runhost(slow_stack):
            # PostgreSQL ends the frozen session after 30 s; the deadline leaves the second run host room to start
            # and claim on a loaded machine (without the session's end it would never take over, however long).
            probe(lambda: lease_epoch(slow_stack, run["id"]) >= 2, timeout=120)
            assert not session_alive(slow_stack, backend)
            os.kill(victim, signal.SIGCONT)
            fenced_run_completed(api, ws, run)
            probe(lambda: stood_down(slow_stack, run["id"]))
            no_unexpected_failure(slow_stack, run["id"])
            assert slow_stack.pid("runhost") == victim and alive(victim)
    finally:
        os.kill(victim, signal.SIGCONT)


def cut_sessions_in_use(stack: RunningStack, run_id: str, times: int) -> int:
    """End (pg_terminate_backend, as an operator or a restarting server would) run host sessions caught
    amid a statement or a transaction, `times` of them one after another, while the run goes on; returns
    how many were cut before the run ended."""

    async def cut() -> int:
        conn = await asyncpg.connect(stack.admin_dsn("runhost"))
        try:
            done = 0
            while done < times:
                if await conn.fetchval("SELECT status FROM runs WHERE id = $1", run_id) != "running":
                    break
                done += await conn.fetchval(
                    "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity"
                    " WHERE datname = 'runhost' AND pid <> pg_backend_pid()"
                    "   AND state IN ('active', 'idle in transaction')"
                )
            return done
        finally:
            await conn.close()

    return asyncio.run(cut())


@pytest.mark.local_stack
@pytest.mark.parametrize("fault", ["sessions cut", "postgresql killed"])
def test_a_run_whose_database_sessions_are_lost_resumes_and_completes(slow_stack: RunningStack, fault: str) -> None:
    """A session lost under the worker (an operator ends three in use; PostgreSQL is killed, and restarted by
    the supervisor) ends its attempt as a crash would, not the run: the run is taken up again."""
    api = Api(slow_stack)
    ws, run = drafting(api, f"Outlive {fault}", "scripted:stale-draft")
    if fault == "sessions cut":
        assert cut_sessions_in_use(slow_stack, run["id"], times=3) == 3
    else:
        slow_stack.kill("postgres")
    fenced_run_completed(api, ws, run)
    no_unexpected_failure(slow_stack, run["id"])


@pytest.mark.local_stack
def test_after_postgresql_restarts_an_admitted_run_is_claimed_at_once_not_at_the_next_poll(
    dossier_homes: Callable[[str], Path],
) -> None:
    """The claim loop is woken by the admission's NOTIFY; its poll (here two minutes) is only the backstop.
    PostgreSQL killed and restarted by the supervisor took the run host's LISTEN session with it, and runs
    then waited for the poll until the run host restarted."""
    with stack_running(dossier_homes("poll-home"), extra_env={"DOSSIER_RUN_POLL_SECONDS": "120"}) as stack:
        api = Api(stack)
        ws = api.workspace()
        assert api.wait_run(api.start_run(ws["id"], "Before the restart")["id"], timeout=30)["status"] == "completed"
        stack.kill("postgres")

        def admitted() -> dict[str, Any] | None:
            answer = api.http.post(
                f"/v1/workspaces/{ws['id']}/runs",
                json={"question": "After the restart", "request_id": "after-the-restart"},
            )
            return answer.json() if answer.status_code in (200, 202) else None

        run = probe(admitted, timeout=60, interval=0.5)
        assert api.wait_run(run["id"], timeout=30)["status"] == "completed"


@pytest.mark.local_stack
def test_tool_calls_with_wrong_argument_types_are_answered_back(slow_stack: RunningStack) -> None:
    api = Api(slow_stack)
    ws = api.workspace()
    run = api.wait_run(api.start_run(ws["id"], "Types", model="scripted:wrong-types")["id"])
    assert run["status"] == "completed", run["error"]
    assert api.read(run["publication"])["body"] == "# answered after seven bad calls"
    assert api.ok("GET", f"/v1/runs/{run['id']}/files/draft.md") == "recovered"


@pytest.mark.local_stack
def test_an_external_run_survives_kill_9_of_the_run_host_in_a_read_and_in_its_finish(slow_stack: RunningStack) -> None:
    """Between a read and its ledger row, and between the kept answer and the publish: after the restart the
    agent repeats its call, and the run has one read row per material and exactly one publication."""
    api = Api(slow_stack)
    ws = api.workspace()
    a = api.publish("Report A", "Fund X can meet redemptions within 30 days.", ws["id"])
    api.wait_catalog(ws["id"], 1)
    run = api.start_run(ws["id"], "Does Report A hold?", driver="external")
    headers = {"X-Run-Lease": run["lease"]["token"]}
    read_a = {"ref": {"kind": "publication", "id": a["id"], "version": 1}}

    def restarted(victim: int) -> None:
        os.kill(victim, signal.SIGKILL)
        probe(lambda: slow_stack.pid("runhost") != victim and alive(slow_stack.pid("runhost")), timeout=5)

    def until_answered(method: str, route: str, **kwargs: Any) -> Any:
        def attempt() -> Any:
            r = api.http.request(method, f"/v1/runs/{run['id']}{route}", headers=headers, **kwargs)
            return r.json() if r.status_code == 200 else None

        return probe(attempt, timeout=60, interval=0.2)

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        victim = slow_stack.pid("runhost")
        pending = pool.submit(api.http.post, f"/v1/runs/{run['id']}/read", json=read_a, headers=headers, timeout=5)
        restarted(victim)
        with contextlib.suppress(httpx.HTTPError):
            pending.result()  # whatever the dead run host left it: an error, or a late answer
    until_answered("POST", "/read", json=read_a)
    reads = [r for r in api.ledger(run["id"]) if r["stage"] == "read"]
    assert len(reads) == 1

    answer = {"answer": f"- Fund X can meet redemptions within 30 days ({a['id']}@v1)."}
    database = slow_stack.dsn("runhost")

    async def kept() -> bool:
        conn = await asyncpg.connect(database)
        try:
            return bool(await conn.fetchval("SELECT final_answer IS NOT NULL FROM runs WHERE id = $1", run["id"]))
        finally:
            await conn.close()

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        victim = slow_stack.pid("runhost")
        pending = pool.submit(api.http.post, f"/v1/runs/{run['id']}/finish", json=answer, headers=headers, timeout=5)
        probe(lambda: asyncio.run(kept()), timeout=30, interval=0.01)
        restarted(victim)
        with contextlib.suppress(httpx.HTTPError):
            pending.result()
    done = until_answered("POST", "/finish", json=answer)
    assert done["status"] == "completed"
    ledger = api.ledger(run["id"])
    assert len([r for r in ledger if r["stage"] == "included"]) == 1
    published_once(api, ws["id"], done)


@pytest.mark.waits
@pytest.mark.local_stack
def test_an_external_finish_that_won_completes_after_kill_9_though_its_agent_never_comes_back(
    slow_stack: RunningStack,
) -> None:
    """The finish won the run (its answer is kept), then the run host died before the publish: nothing can
    take the run over or cancel it now, so once its lease has run out the run host finishes it from the kept
    answer, publishing that answer once, instead of abandoning it."""
    api = Api(slow_stack)
    ws = api.workspace()
    a = api.publish("Report A", "Fund X can meet redemptions within 30 days.", ws["id"])
    api.wait_catalog(ws["id"], 1)
    run = api.start_run(ws["id"], "Does Report A hold?", driver="external", lease_seconds=30)
    headers = {"X-Run-Lease": run["lease"]["token"]}
    read_a = {"ref": {"kind": "publication", "id": a["id"], "version": 1}}
    assert api.http.post(f"/v1/runs/{run['id']}/read", json=read_a, headers=headers).status_code == 200
    answer = f"- Fund X can meet redemptions within 30 days ({a['id']}@v1)."

    async def status() -> tuple[bool, str]:
        conn = await asyncpg.connect(slow_stack.dsn("runhost"))
        try:
            row = await conn.fetchrow(
                "SELECT final_answer IS NOT NULL AS kept, status FROM runs WHERE id = $1", run["id"]
            )
            return bool(row["kept"]), str(row["status"])
        finally:
            await conn.close()

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        victim = slow_stack.pid("runhost")
        body = {"answer": answer}
        pending = pool.submit(api.http.post, f"/v1/runs/{run['id']}/finish", json=body, headers=headers, timeout=5)
        probe(lambda: asyncio.run(status())[0], timeout=30, interval=0.01)
        os.kill(victim, signal.SIGKILL)
        with contextlib.suppress(httpx.HTTPError):
            pending.result()
    assert asyncio.run(status()) == (True, "running"), "the finish completed before the kill; this proves nothing"

    def answered(method: str, route: str, **kwargs: Any) -> httpx.Response:
        """The answer of the restarted run host (the gateway answers 5xx until it serves again)."""
        return probe(lambda: (r := api.http.request(method, route, **kwargs)).status_code < 500 and r, timeout=60)

    for refused in (
        answered("POST", f"/v1/runs/{run['id']}/lease/take", json={"force": True}),
        answered("GET", f"/v1/runs/{run['id']}/catalog", headers=headers),
    ):
        assert refused.status_code == 409 and refused.json()["error"]["details"]["lease"] == "finishing"
    assert answered("POST", f"/v1/runs/{run['id']}/cancel").json()["status"] == "running"
    done = api.wait_run(run["id"], timeout=90)
    assert done["status"] == "completed", done
    assert api.read(done["publication"])["body"] == answer
    published_once(api, ws["id"], done)


@pytest.mark.waits
@pytest.mark.local_stack
def test_an_external_run_whose_lease_stays_expired_is_abandoned(slow_stack: RunningStack) -> None:
    api = Api(slow_stack)
    ws = api.workspace()
    run = api.start_run(ws["id"], "Left alone?", driver="external", lease_seconds=30)
    headers = {"X-Run-Lease": run["lease"]["token"]}
    assert api.http.get(f"/v1/runs/{run['id']}/catalog", headers=headers).status_code == 200
    failed = api.wait_run(run["id"], timeout=90)
    assert (failed["status"], failed["error"]) == ("failed", "abandoned")
    assert failed["lease_state"]["expires_at"] < failed["finished_at"]
    late = api.http.get(f"/v1/runs/{run['id']}/catalog", headers=headers)
    assert late.status_code == 409 and late.json()["error"]["details"]["status"] == "failed"
    taken = api.http.post(f"/v1/runs/{run['id']}/lease/take", json={"force": True})
    assert taken.status_code == 409
