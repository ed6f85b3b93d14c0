"""Backup and restore of a compose deployment (deploy/compose-backup.sh, deploy/compose-restore.sh) against the
compose stack of `make test-containers`: data of every kind is written, the stack is backed up, taken down
with its volumes, and restored into a new project, which serves the data as it was to the very same tokens.

Marked `compose_backup`: it takes the session's compose stack down, so test-containers.sh runs it alone,
after the rest of the suite; against the local stack (`make test`) it is deselected.
"""

from __future__ import annotations

import hashlib
import subprocess
import uuid
from pathlib import Path

import pytest

from devstack.procs import free_port
from tests.support.api import Api, gateway_client, probe
from tests.support.backupdata import REPORT, look, same_caller, seed
from tests.support.compose import ROOT, ComposeStack
from tests.support.documents import QUESTION
from tests.support.stack import RunningStack, external_stack

pytestmark = pytest.mark.compose_backup


def script(name: str, compose: ComposeStack, *args: str | Path, **env: str) -> subprocess.CompletedProcess[str]:
    argv = ["sh", str(ROOT / "deploy" / name), "--env-file", str(compose.env_file), *map(str, args)]
    done = subprocess.run(argv, cwd=ROOT, env=compose.compose_env(**env), capture_output=True, text=True, timeout=500)
    assert "Traceback" not in done.stderr, done.stderr
    return done


# Backing up, taking down, restoring and starting a whole compose project: over the default timeout.
@pytest.mark.timeout(900)
def test_a_deployment_restored_into_a_new_project_serves_everything_as_it_was(
    stack: RunningStack, tmp_path: Path
) -> None:
    assert stack.compose is not None, "this test backs up the compose stack of make test-containers"
    api = Api(stack)
    seeded = seed(api, stack) | {"scope": api.scope}
    admin_headers = {"Authorization": f"Bearer {stack.admin_token}"}
    before = look(api.http, seeded, gateway_client(base_url=stack.url, headers=admin_headers))
    assert before["search"]["items"] and before["revoked"] == 401
    assert before["report"] == hashlib.sha256(REPORT).hexdigest()

    archive = tmp_path / "dossier-compose.tar.gz"
    done = script("compose-backup.sh", stack.compose, archive)
    assert done.returncode == 0, done.stderr
    assert archive.stat().st_mode & 0o077 == 0, "the archive holds every secret: the owner's alone"
    stack.compose.down()

    (tmp_path / "restored").mkdir()
    # The name test-containers.sh takes down too, should this test not get to it.
    new = ComposeStack(f"{stack.compose.project}-restored", {}, tmp_path / "restored" / ".env")
    cut = tmp_path / "cut.tar.gz"
    cut.write_bytes(archive.read_bytes()[: archive.stat().st_size * 2 // 3])
    refused = script("compose-restore.sh", new, cut)
    assert refused.returncode == 2 and "is not a usable backup" in refused.stderr, refused.stderr
    assert not new.env_file.exists(), "a refused restore leaves no .env behind"

    port = free_port()
    try:
        done = script("compose-restore.sh", new, archive, DOSSIER_PUBLISH_PORT=str(port))
        assert done.returncode == 0, done.stderr
        restored = external_stack(f"http://127.0.0.1:{port}", stack.admin_token)
        http = same_caller(api, restored)
        again = gateway_client(base_url=restored.url, headers=admin_headers)
        assert look(http, seeded, again) == before
        # The restored deployment goes on: it takes writes, and a new run completes.
        body = {"question": QUESTION, "request_id": uuid.uuid4().hex}
        run = http.post(f"/v1/workspaces/{seeded['workspace']}/runs", json=body)
        assert run.status_code == 202, run.text
        probe(lambda: http.get(f"/v1/runs/{run.json()['id']}").json()["status"] == "completed", timeout=120)
    finally:
        if new.env_file.exists():
            new.down()
