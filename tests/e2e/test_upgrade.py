"""A home made by the previous release, started under this code: every kind of data as it was, and a retried
admission answered with the run it made (issue 39: a retry across an upgrade was refused 409).

The previous release is a commit of this repository's history (the last one that landed before this
round), taken out with `git archive` and run from its own tree on the same virtual environment.
"""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.api import Api, gateway_client, probe
from tests.support.documents import ANNOUNCEMENT, QUESTION, pdf
from tests.support.stack import ROOT, RunningStack, start_stack, stop_stack

pytestmark = pytest.mark.local_stack

# The release this code upgrades from: round 3 as it landed.
PREVIOUS_RELEASE = "928290442cf06ae8cdc76320d4940ce571301932"


@pytest.fixture(scope="module")
def previous_release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tree = tmp_path_factory.mktemp("previous-release")
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", PREVIOUS_RELEASE], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True)
    return tree


def free_range(count: int) -> int:
    """The first of `count` consecutive free ports: the previous release numbers its metrics ports from
    `DOSSIER_METRICS_BASE_PORT` (this code chooses each one free)."""
    for base in range(20000, 60000, count):
        try:
            with contextlib.ExitStack() as held:
                for port in range(base, base + count):
                    sock = held.enter_context(socket.socket())
                    sock.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
    raise RuntimeError("no free range of ports")


@pytest.fixture
def home(dossier_homes: Callable[[str], Path]) -> Path:
    return dossier_homes("upgrade")


@pytest.fixture
def stacks() -> Iterator[list[RunningStack]]:
    """Every stack the test starts, stopped at its end, failure or not."""
    started: list[RunningStack] = []
    try:
        yield started
    finally:
        for running in started:
            if running.proc is not None:
                stop_stack(running.proc)


def seen_by(api: Api, made: dict[str, Any]) -> dict[str, Any]:
    """Everything of every kind the previous release made, as the API shows it now."""
    ws_id, run_id, pub = made["workspace"]["id"], made["run"]["id"], made["publication"]
    run = api.run(run_id)
    hits = api.ok("GET", "/v1/evidence/search", params={"q": "redemption gates"})["items"]
    return {
        "workspace": api.ok("GET", f"/v1/workspaces/{ws_id}"),
        "goal versions": api.ok("GET", f"/v1/workspaces/{ws_id}/goal/versions"),
        "catalog": api.ok("GET", f"/v1/workspaces/{ws_id}/catalog?limit=200")["items"],
        "checkpoint": api.ok("GET", f"/v1/workspaces/{ws_id}/checkpoint"),
        "publication": api.read(pub),
        "answer": api.read(run["publication"]),
        # As the previous release showed them: a claim now also says which locators it cites and whether what it
        # cites changed since (issue 37), an addition.
        "claims": [
            {k: claim[k] for k in ("text", "refs", "support", "score")}
            for claim in api.ok("GET", f"/v1/publications/{run['publication']['id']}/versions/1/claims")["items"]
        ],
        "source": api.ok("GET", "/v1/sources/announcement"),
        "asset": api.ok("GET", f"/v1/assets/{made['asset']['asset_id']}"),
        "search": [(h["source_id"], h["version"], h["locator"]) for h in hits],
        "run": {k: run[k] for k in ("id", "status", "question", "goal_version", "publication", "error")},
        "ledger": once_each(api.ledger(run_id)),
        # Read back whole: the previous release kept each run's files under its own keys (runs/<run>/...).
        "files": {p: (size, api.ok("GET", f"/v1/runs/{run_id}/files/{p}")) for p, size in api.files(run_id).items()},
        "prov": api.ok("GET", f"/v1/runs/{run_id}/prov"),
    }


def once_each(ledger: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ledger's rows, the first of each (stage, ref, locator) and without `seq`: the previous release could
    write one read twice, and the upgrade keeps the first of such rows (issue 35; the rows are unique now)."""
    seen: set[str] = set()
    rows = []
    for row in ledger:
        key = json.dumps([row["stage"], row["ref"], row["locator"]], sort_keys=True)
        if key not in seen:
            seen.add(key)
            rows.append({k: v for k, v in row.items() if k != "seq"})
    return rows


def make_everything(api: Api) -> dict[str, Any]:
    ws = api.workspace()
    api.ok("PUT", f"/v1/workspaces/{ws['id']}/goal", json={"text": "Assess Fund X over a year", "expected_version": 1})
    pub = api.publish("Report A: Fund X liquidity", "Fund X can meet redemptions within 30 days.", ws["id"])
    asset = api.upload(pdf(ANNOUNCEMENT), "announcement", "announcement.pdf", ws["id"])
    assert asset["status"] == "active", asset
    api.wait_catalog(ws["id"], 2)
    request = {"request_id": "upgrade-retry-1", "history": [{"publication_id": pub["id"], "version": 1}]}
    run = api.wait_run(api.start_run(ws["id"], QUESTION, **request)["id"])
    assert run["status"] == "completed", run["error"]
    return {"workspace": ws, "publication": pub, "asset": asset, "run": run, "request": request}


def test_a_home_of_the_previous_release_keeps_its_data_and_its_request_ids(
    previous_release: Path, home: Path, stacks: list[RunningStack]
) -> None:
    old_ports = {"DOSSIER_METRICS_BASE_PORT": str(free_range(40))}
    stacks.append(start_stack(home, root=previous_release, extra_env=old_ports))
    api = Api(stacks[-1])
    made = make_everything(api)
    before = seen_by(api, made)
    stop_stack(stacks[-1].proc)

    stacks.append(start_stack(home))
    api.http = gateway_client(base_url=stacks[-1].url, headers=api.http.headers, timeout=30)
    # The catalog's rules changed on purpose (issue 37): the analyst's own material comes first, and a run's
    # report is no item (which earlier pins were reports, the workspace asks the artifact service after its
    # start). The same items otherwise, each as it was.
    kept = sorted(
        (i for i in before.pop("catalog") if not i["title"].startswith("Report of run_")),
        key=lambda i: (i["run_id"] is not None, i["kind"], i["id"]),
    )

    def caught_up() -> list[dict[str, Any]] | None:
        items = api.ok("GET", f"/v1/workspaces/{made['workspace']['id']}/catalog?limit=200")["items"]
        return items if len(items) == len(kept) else None

    shown = probe(caught_up, timeout=60)
    assert [i["run_id"] is not None for i in shown] == sorted(i["run_id"] is not None for i in shown)
    assert sorted(shown, key=lambda i: (i["run_id"] is not None, i["kind"], i["id"])) == kept
    # The token the previous release issued works, and the data reads as it did.
    after = seen_by(api, made)
    for kind in before:
        assert after[kind] == before[kind], kind
    # The same admission again is the run the previous release made, not a conflict.
    retried = api.http.post(
        f"/v1/workspaces/{made['workspace']['id']}/runs", json={"question": QUESTION, **made["request"]}
    )
    assert retried.status_code == 200, retried.text
    assert retried.json()["id"] == made["run"]["id"]
    changed = api.http.post(
        f"/v1/workspaces/{made['workspace']['id']}/runs", json={"question": "Another question?", **made["request"]}
    )
    assert changed.status_code == 409, changed.text
    # And the upgraded stack does new work on the old data.
    again = api.wait_run(api.start_run(made["workspace"]["id"], QUESTION)["id"])
    assert again["status"] == "completed", again["error"]
