"""The Python client installed as the docs say (`pip install ./clients/python` into a fresh virtual
environment, nothing of the server beside it) runs sessions that outlive their lease."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest

from tests.support.api import Api
from tests.support.cli import cli_env
from tests.support.documents import ANNOUNCEMENT, pdf
from tests.support.stack import RunningStack
from tests.support.venv import INSTALL_SECONDS, fresh_venv, run_script

SCRIPTS = Path(__file__).parent / "client_venv"


@pytest.fixture(scope="module")
def client_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return fresh_venv(tmp_path_factory.mktemp("client-venv") / "venv", "./clients/python")


@pytest.mark.waits
@pytest.mark.timeout(INSTALL_SECONDS + 300)
def test_an_installed_client_keeps_sessions_past_their_lease(client_python: Path, stack: RunningStack) -> None:
    api = Api(stack)
    ws = api.workspace()
    assert api.upload(pdf(ANNOUNCEMENT), "announcement", "announcement.pdf", ws["id"])["status"] == "active"
    api.wait_catalog(ws["id"], 1)
    token = api.http.headers["Authorization"].removeprefix("Bearer ")
    out = run_script(
        client_python,
        SCRIPTS / "outlive_lease.py",
        ws["id"],
        "What changed for Fund X?",
        env=cli_env(stack, token),
        timeout=240,
    )
    sessions = json.loads(out)
    for name, session in sessions.items():
        first, last, run = session["first"], session["last"], session["run"]
        # The same lease, renewed past its first expiry: no take-over (the epoch) was needed.
        assert last["epoch"] == first["epoch"] == 1, name
        assert datetime.fromisoformat(last["expires_at"]) > datetime.fromisoformat(first["expires_at"]), name
        assert run["status"] == "completed" and run["publication"] is not None, name
        assert datetime.fromisoformat(run["finished_at"]) > datetime.fromisoformat(first["expires_at"]), name
        published = api.read(run["publication"])
        assert [(s["kind"], s["id"]) for s in published["sources"]] == [("source", "announcement")], name
    # The package imported is the installed one, not the repository's tree.
    show = run_script(client_python, SCRIPTS / "where.py", env=cli_env(stack, token), timeout=60)
    assert "site-packages" in show and "clients/python" not in show
