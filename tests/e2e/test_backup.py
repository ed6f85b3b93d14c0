"""Backup and restore (CONTRACT "Operations"): `dossier admin backup` of a running stack, `dossier admin restore`
into an empty home, `make up` there.

One stack is backed up twice: once holding data of every kind, which the restored stack must serve as it
was (bytes, content hashes, ledgers, checkpoints, tokens, search); once with runs in flight, which the
restored stack must resume or fail cleanly, never leaving a run's publication half made.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import json
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.api import FINAL, Api, gateway_client, probe
from tests.support.backupdata import REPORT, look, same_caller, seed
from tests.support.cli import dossier, no_traceback
from tests.support.documents import QUESTION
from tests.support.stack import RunningStack, stack_running

# A backup starts and stops stacks of its own and reads their homes: the local stack only.
pytestmark = pytest.mark.local_stack

# Three hundred paced steps (30 s at 0.1 s a step, within the run host's 400), then an answer with a checkpoint
# proposal: a run still under way when the backup is made, however long a loaded machine takes to make it.
PACED = [{"name": "write_draft", "arguments": {"text": f"draft {i}"}} for i in range(300)] + [
    {"name": "finish", "arguments": {"answer": "# resumed answer\n", "checkpoint_proposal": {"summary": "after"}}}
]


@pytest.fixture(scope="module")
def stack_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    scripts = tmp_path_factory.mktemp("scripts")
    (scripts / "paced.json").write_text(json.dumps(PACED))
    # Short leases: the restored run host takes over the runs of the backed-up one soon after it starts.
    return {
        "DOSSIER_RUN_LEASE_SECONDS": "3",
        "DOSSIER_RUN_STEP_DELAY_SECONDS": "0.1",
        "DOSSIER_SCRIPTS_DIR": str(scripts),
    }


@pytest.fixture(scope="module")
def original(dossier_homes: Callable[[str], Path], stack_env: dict[str, str]) -> Iterator[RunningStack]:
    with stack_running(dossier_homes("backed-up"), extra_env=stack_env) as running:
        yield running


def backup(stack: RunningStack, archive: Path) -> dict[str, Any]:
    done = dossier(stack, None, "admin", "backup", "--out", str(archive), "--home", str(stack.local_home()), "--json")
    assert done.returncode == 0 and no_traceback(done), done.stderr
    summary = dict(json.loads(done.stdout))
    assert archive.stat().st_mode & 0o077 == 0, "the archive holds secrets: the owner's alone"
    return summary


def restore(archive: Path, home: Path) -> subprocess.CompletedProcess[str]:
    return dossier(None, None, "admin", "restore", str(archive), "--home", str(home), "--json")


# A backup, a restore, the restored stack's start and the runs' rest (and the backed-up one's start, for the first
# test): over the default.
@pytest.mark.timeout(480)
def test_a_restored_stack_serves_everything_as_it_was(
    original: RunningStack, dossier_homes: Callable[[str], Path], stack_env: dict[str, str], tmp_path: Path
) -> None:
    api = Api(original)
    seeded = seed(api, original) | {"scope": api.scope}
    admin = gateway_client(base_url=original.url, headers={"Authorization": f"Bearer {original.admin_token}"})
    before = look(api.http, seeded, admin)
    assert (
        before["search"]["items"]
        and before["revoked"] == 401
        and before["report"] == hashlib.sha256(REPORT).hexdigest()
    )

    summary = backup(original, tmp_path / "dossier.tar.gz")
    assert summary["objects"]["count"] >= 3 and summary["writes_held_seconds"] > 0
    assert summary["postgres"]["databases"] == ["gateway", "workspace", "runhost", "publication", "artifact", "assets"]

    home = dossier_homes("restored")
    (home / "stray").write_text("not a home")
    refused = restore(tmp_path / "dossier.tar.gz", home)
    assert refused.returncode == 2 and "is not empty" in refused.stderr and no_traceback(refused)
    (home / "stray").unlink()
    done = restore(tmp_path / "dossier.tar.gz", home)
    assert done.returncode == 0 and no_traceback(done), done.stderr
    assert json.loads(done.stdout)["created_at"] == summary["created_at"]

    with stack_running(home, extra_env=stack_env) as restored:
        assert restored.admin_token == original.admin_token
        http = same_caller(api, restored)
        again = gateway_client(base_url=restored.url, headers={"Authorization": f"Bearer {restored.admin_token}"})
        assert look(http, seeded, again) == before
        # The restored stack goes on: it takes writes, and new runs complete.
        body = {"question": QUESTION, "request_id": uuid.uuid4().hex}
        run = http.post(f"/v1/workspaces/{seeded['workspace']}/runs", json=body)
        assert run.status_code == 202, run.text
        probe(lambda: http.get(f"/v1/runs/{run.json()['id']}").json()["status"] == "completed", timeout=120)


def test_a_corrupt_archive_is_refused_and_the_home_left_empty(
    original: RunningStack, dossier_homes: Callable[[str], Path], tmp_path: Path
) -> None:
    archive = tmp_path / "dossier.tar.gz"
    backup(original, archive)
    data = archive.read_bytes()
    middle = len(data) // 2
    flipped = data[:middle] + bytes([data[middle] ^ 0xFF]) + data[middle + 1 :]
    for name, broken in (("flipped", flipped), ("cut", data[: len(data) * 2 // 3])):
        bad = tmp_path / f"{name}.tar.gz"
        bad.write_bytes(broken)
        home = dossier_homes(f"restored-{name}")
        done = restore(bad, home)
        assert done.returncode == 2 and no_traceback(done), (name, done.stderr)
        assert "is not a usable backup" in done.stderr, (name, done.stderr)
        assert list(home.iterdir()) == [], name


# A backup, a restore, the restored stack's start and the runs' rest (and the backed-up one's start, for the first
# test): over the default.
@pytest.mark.timeout(480)
def test_runs_in_flight_at_the_backup_are_resumed_or_failed_cleanly(
    original: RunningStack, dossier_homes: Callable[[str], Path], stack_env: dict[str, str], tmp_path: Path
) -> None:
    api = Api(original)
    ws = api.workspace()
    runs = [api.start_run(ws["id"], f"Question {i} about Fund X", model="scripted:paced") for i in range(3)]
    probe(lambda: all("draft.md" in api.files(run["id"]) for run in runs), timeout=120)
    backup(original, tmp_path / "dossier.tar.gz")
    statuses = [api.run(run["id"])["status"] for run in runs]
    assert statuses == ["running"] * 3, f"a run ended before the backup was made; the test proves nothing: {statuses}"

    home = dossier_homes("restored-in-flight")
    done = restore(tmp_path / "dossier.tar.gz", home)
    assert done.returncode == 0 and no_traceback(done), done.stderr
    with stack_running(home, extra_env=stack_env) as restored:
        http = same_caller(api, restored)

        def final(run_id: str) -> dict[str, Any] | None:
            found = http.get(f"/v1/runs/{run_id}").json()
            return found if found["status"] in FINAL else None

        ended = [probe(lambda r=run: final(r["id"]), timeout=180) for run in runs]
        catalog = http.get(f"/v1/workspaces/{ws['id']}/catalog", params={"limit": 200}).json()["items"]
        for run in ended:
            produced = [i for i in catalog if i["kind"] == "publication" and i["run_id"] == run["id"]]
            if run["status"] == "completed":
                # Published once, with its one version, and the workspace knows it once.
                assert len(produced) == 1, (run["id"], produced)
                answer = run["publication"]
                assert http.get(f"/v1/publications/{answer['id']}").json()["latest_version"] == 1
                body = http.get(f"/v1/publications/{answer['id']}/versions/1").json()["body"]
                assert "resumed answer" in body, body
            else:
                assert run["status"] == "failed" and run["publication"] is None and not produced, run
        assert any(run["status"] == "completed" for run in ended), [run["error"] for run in ended]


def test_writes_wait_while_held_and_reads_go_on(original: RunningStack) -> None:
    """`dossier admin writes hold|release`, what a backup does around its copy of the databases."""
    api = Api(original)
    admin = ("--url", original.url, "--token", original.admin_token, "--json")
    held = dossier(None, None, "admin", "writes", "hold", "--seconds", "120", *admin)
    assert held.returncode == 0, held.stderr
    state = original.state()
    assert json.loads(held.stdout)["processes"] == int(str(state["gateway_workers"])) * int(str(state["replicas"]))
    try:
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            write = pool.submit(api.http.post, "/v1/workspaces", json={"title": "held", "goal": "Wait for the hold"})
            assert api.http.get("/v1/workspaces").status_code == 200
            assert not write.done(), "a write went through while writes were held"
            released = dossier(None, None, "admin", "writes", "release", *admin)
            assert released.returncode == 0 and json.loads(released.stdout)["held"] is False, released.stderr
            assert write.result(timeout=60).status_code == 201
    finally:
        dossier(None, None, "admin", "writes", "release", *admin)
