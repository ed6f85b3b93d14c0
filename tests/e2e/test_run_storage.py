"""What runs leave behind, on a stack of its own (issue 37, "Little left behind"): run files stored once per
content and read back as written (after a crash-resume too), an ended run's model-call journal trimmed to
what a resume needs, and DOSSIER_RUN_RETENTION_DAYS letting go of ended runs' files and journals while
their ledger, answer, claims and PROV stay, and a content another run still names stays with it.

It reads the stack's object files and runhost's database, kills runhost and restarts the stack: the local
stack only.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import uuid
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from services.runhost.context import ARGUMENT_CHARS, RESULT_CHARS
from services.runhost.journal import trimmed_entry
from tests.support.api import Api, error_of, gateway_client, probe
from tests.support.fake_openai import running as fake_openai_server
from tests.support.gateway import sign_in
from tests.support.stack import RunningStack, start_stack, stop_stack

pytestmark = pytest.mark.local_stack

QUESTION = "What do the Fund X liquidity reports conclude about redemptions?"
SWEPT = {
    # Paced steps and short leases: a crash lands mid-run and the run is taken over at once.
    "DOSSIER_RUN_LEASE_SECONDS": "3",
    "DOSSIER_RUN_STEP_DELAY_SECONDS": "0.05",
    "DOSSIER_RUN_STORAGE_SWEEP_SECONDS": "0.2",
    "DOSSIER_RUN_FILES_GRACE_SECONDS": "1",
}


class Stack:
    """The module's stack, which the retention test restarts with another setting."""

    def __init__(self, home: Path, env: dict[str, str]):
        self.home, self.env = home, env
        self.running: RunningStack = start_stack(home, extra_env=env)

    def restart(self, **extra: str) -> RunningStack:
        stop_stack(self.running.proc)  # type: ignore[arg-type]
        self.running = start_stack(self.home, extra_env=self.env | extra)
        return self.running

    def stop(self) -> None:
        stop_stack(self.running.proc)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def model_url() -> Iterator[str]:
    with fake_openai_server() as url:
        yield url


@pytest.fixture(scope="module")
def storage_stack(dossier_homes: Callable[[str], Path], model_url: str) -> Iterator[Stack]:
    env = SWEPT | {"DOSSIER_OPENAI_BASE_URL": f"{model_url}/v1", "DOSSIER_OPENAI_MODEL": "fake-model"}
    stack = Stack(dossier_homes("storage-home"), env)
    try:
        yield stack
    finally:
        stack.stop()


@pytest.fixture
def api(storage_stack: Stack) -> Api:
    return Api(storage_stack.running)


def workspace(api: Api, reports: int = 6) -> str:
    ws = str(api.workspace(goal="Assess the liquidity risk of Fund X")["id"])
    for i in range(reports):
        body = " ".join(
            f"Report {i} finds Fund X met redemption request {j} in {10 + i * j % 50} days." for j in range(30)
        )
        api.publish(f"Fund X liquidity report {i:02d}", body, ws)
    api.wait_catalog(ws, reports)
    return ws


def completed(api: Api, ws: str, question: str = QUESTION, **extra: Any) -> dict[str, Any]:
    run = api.wait_run(api.start_run(ws, question, **extra)["id"], timeout=180)
    assert run["status"] == "completed", run["error"]
    return run


def files_of(api: Api, run_id: str) -> dict[str, str]:
    return {path: api.ok("GET", f"/v1/runs/{run_id}/files/{path}") for path in api.files(run_id)}


def raw_objects(stack: RunningStack) -> dict[str, bytes]:
    """Every object under `runs/`, by key, as stored."""
    root = stack.local_home() / "objects" / "dossier"
    return {str(p.relative_to(root)): p.read_bytes() for p in (root / "runs").rglob("*") if p.is_file()}


def stored(stack: RunningStack) -> dict[str, bytes]:
    """Every object under `runs/`, by key: a content's text (stored deflated), a per-run file's bytes."""
    return {
        key: zlib.decompress(data) if key.startswith("runs/sha256/") else data
        for key, data in raw_objects(stack).items()
    }


def content_key(text: str) -> str:
    digest = hashlib.sha256(text.encode()).hexdigest()
    return f"runs/sha256/{digest[:2]}/{digest}"


def runhost_sql(stack: RunningStack, query: str, *args: Any) -> list[asyncpg.Record]:
    async def fetch() -> list[asyncpg.Record]:
        conn = await asyncpg.connect(stack.dsn("runhost"))
        try:
            return list(await conn.fetch(query, *args))
        finally:
            await conn.close()

    return asyncio.run(fetch())


def test_two_runs_reading_the_same_reports_store_each_passage_once(api: Api, storage_stack: Stack) -> None:
    ws = workspace(api)
    first, second = completed(api, ws), completed(api, ws)
    one, two = files_of(api, first["id"]), files_of(api, second["id"])
    shared = {p for p in one if p.startswith("sources/")} & {p for p in two if p.startswith("sources/")}
    assert len(shared) >= 6, "the runs did not read the same reports: the test proves nothing"

    objects = stored(storage_stack.running)
    assert not any(key.startswith((f"runs/{first['id']}", f"runs/{second['id']}")) for key in objects)
    for path in shared:
        assert one[path] == two[path]
        # One object holds the passage both runs read, and it is the bytes each run reads back.
        assert objects[content_key(one[path])] == one[path].encode()
    for text in [*one.values(), *two.values()]:
        assert objects[content_key(text)] == text.encode()
    held = {content_key(text) for text in [*one.values(), *two.values()]}
    assert sum(len(objects[k]) for k in held) < sum(len(t.encode()) for t in [*one.values(), *two.values()])
    # Kept deflated: the stored bytes of the two runs' files are well under their text.
    raw = raw_objects(storage_stack.running)
    assert sum(len(raw[k]) for k in held) < sum(len(objects[k]) for k in held) / 2


def test_a_crash_resumed_run_reads_its_files_back_as_written(api: Api, storage_stack: Stack) -> None:
    ws = workspace(api, reports=12)
    clean = files_of(api, completed(api, ws)["id"])
    run = api.start_run(ws, QUESTION)
    notes = probe(
        lambda: (n := sum(p.startswith("notes/") for p in api.files(run["id"]))) >= 4 and n, timeout=120, interval=0.05
    )
    storage_stack.running.kill("runhost")
    assert notes < 12, "the run finished before the crash; the test proves nothing"
    run = api.wait_run(run["id"], timeout=180)
    assert run["status"] == "completed", run["error"]

    resumed = files_of(api, run["id"])
    assert {p for p in clean if p.startswith(("sources/", "notes/"))} <= set(resumed)
    objects = stored(storage_stack.running)
    for path, text in resumed.items():
        assert len(text.encode()) == api.files(run["id"])[path]
        assert objects[content_key(text)] == text.encode()
        if path.startswith("sources/") and path in clean:  # (it also read the clean run's answer)
            assert text == clean[path], path


def test_an_ended_runs_journal_keeps_only_what_a_resume_needs(api: Api, storage_stack: Stack) -> None:
    ws = workspace(api, reports=2)
    # A model that lists the catalog, searches, reads pages of catalog.md and writes long notes.
    run = completed(api, ws, f"scenario:pages:3 {uuid.uuid4().hex[:6]}", model="openai")
    stack = storage_stack.running
    probe(lambda: runhost_sql(stack, "SELECT 1 FROM runs WHERE id = $1 AND journal_trimmed_at IS NOT NULL", run["id"]))

    rows = runhost_sql(
        stack, "SELECT request_id, input_hash, response, result FROM model_journal WHERE run_id = $1", run["id"]
    )
    assert len(rows) == run["stats"]["model_requests"] >= 10
    notes = [text for path, text in files_of(api, run["id"]).items() if path.startswith("notes/")]
    assert len(notes) == 3 and all(len(note) > RESULT_CHARS for note in notes)
    entries = [(json.loads(r["response"]), json.loads(r["result"] or "null")) for r in rows]
    for row, (response, result) in zip(rows, entries, strict=True):
        assert len(row["input_hash"]) == 64 and row["request_id"].startswith(run["id"])
        assert trimmed_entry(response, result) == (response, result)
        for item in (result or {}).get("batch", []):
            assert len(item["text"]) <= RESULT_CHARS
            assert all(not isinstance(v, list | dict) for v in item["data"].values()), item["data"]
            assert all(len(v) <= ARGUMENT_CHARS for v in item["arguments"].values() if isinstance(v, str))
    journal = sum(len(str(r["response"])) + len(str(r["result"] or "")) for r in rows)
    assert journal < sum(len(note) for note in notes), "the notes' text is still in the journal"


def test_retention_lets_go_of_ended_runs_files_and_keeps_what_they_concluded(api: Api, storage_stack: Stack) -> None:
    ws = workspace(api, reports=3)
    run = completed(api, ws)
    files = files_of(api, run["id"])
    source = next(p for p in files if p.startswith("sources/pub_"))
    pub_id = source.removeprefix("sources/").split("@")[0]
    # An outside agent's run, still running, reads the same report: its copy is the same content.
    agent = api.start_run(ws, "Is Fund X liquid?", driver="external", lease_seconds=3600)
    lease = {"X-Run-Lease": agent["lease"]["token"]}
    read = api.ok(
        "POST",
        f"/v1/runs/{agent['id']}/read",
        json={"ref": {"kind": "publication", "id": pub_id, "version": 1}},
        headers=lease,
    )
    assert read["path"] == source and read["text"] == files[source]

    publication = run["publication"]
    kept = {
        "run": f"/v1/runs/{run['id']}",
        "ledger": f"/v1/runs/{run['id']}/ledger",
        "prov": f"/v1/runs/{run['id']}/prov",
        "answer": f"/v1/publications/{publication['id']}/versions/{publication['version']}",
        "claims": f"/v1/publications/{publication['id']}/versions/{publication['version']}/claims",
    }
    before = {name: api.ok("GET", path) for name, path in kept.items()}
    assert api.ok("GET", f"/v1/runs/{run['id']}/files")["released_at"] is None

    stack = storage_stack.restart(DOSSIER_RUN_RETENTION_DAYS="0")
    api = Api(stack, api.scope)
    listing = probe(lambda: (page := api.ok("GET", f"/v1/runs/{run['id']}/files"))["released_at"] and page)
    assert listing["items"] == [] and listing["next_cursor"] is None
    assert {name: api.ok("GET", path) for name, path in kept.items()} == before
    refused = api.http.get(f"/v1/runs/{run['id']}/files/plan.md")
    assert refused.status_code == 404 and error_of(refused)["details"]["released_at"] == listing["released_at"]
    with gateway_client(base_url=stack.url) as browser:
        sign_in(browser, stack.token(api.scope))
        page = browser.get(f"/runs/{run['id']}")
    assert page.status_code == 200 and "The working files were let go on" in page.text

    # What only the released run named is deleted; the report the running agent also read stays, whole.
    probe(lambda: content_key(files["plan.md"]) not in stored(stack), timeout=60)
    assert stored(stack)[content_key(files[source])] == files[source].encode()
    assert api.ok("GET", f"/v1/runs/{agent['id']}/files/{source}") == files[source]
    assert api.ok("GET", f"/v1/runs/{agent['id']}/files")["released_at"] is None
    assert not runhost_sql(stack, "SELECT 1 FROM model_journal WHERE run_id = $1", run["id"])
