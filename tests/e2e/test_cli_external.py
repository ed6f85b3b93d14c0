"""An outside agent's run in a few lines of CLI, as the README shows it: start --external --env, search,
read Report A (attached to the workspace, so in the run's catalog) and a passage, finish, ledger; the lease
travels in DOSSIER_RUN_LEASE."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys

from tests.support.api import Api
from tests.support.cli import cli_env, dossier, no_traceback
from tests.support.documents import ANNOUNCEMENT, pdf
from tests.support.stack import ROOT, RunningStack


def test_an_outside_agent_run_in_five_lines_of_cli(stack: RunningStack) -> None:
    api = Api(stack)
    ws = api.workspace()
    report_a = api.publish("Report A", "Fund X can meet 30-day redemptions.", ws["id"])
    assert api.upload(pdf(ANNOUNCEMENT), "announcement", "announcement.pdf", ws["id"])["status"] == "active"
    api.wait_catalog(ws["id"], 2)
    token = api.http.headers["Authorization"].removeprefix("Bearer ")
    cli = f"{shlex.quote(sys.executable)} -m dossier_cli"

    def shell(script: str) -> subprocess.CompletedProcess[str]:
        env = cli_env(stack, token) | {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        return subprocess.run(["bash", "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)

    begin = f'eval "$({cli} run start {ws["id"]} "Does the gate change the fund?" --external --env)"'
    found = shell(f'{begin}\n{cli} run search "redemption gates" --json\necho "RUN=$DOSSIER_RUN"')
    assert found.returncode == 0 and no_traceback(found), found.stderr
    hit = json.loads(found.stdout.split("RUN=")[0])["items"][0]
    assert hit["evidence_id"] is not None, hit
    run_id = found.stdout.rsplit("RUN=", 1)[1].strip()
    lease_env = shell(f"{cli} run take {run_id} --force --env")
    assert lease_env.returncode == 0, lease_env.stderr
    answer = (
        f"- Report A expected 30-day redemptions ({report_a['id']}@v1); the board introduces redemption gates"
        f" of 10 percent per quarter (announcement@v1 {hit['locator']})."
    )
    script = "\n".join(
        [
            lease_env.stdout.strip(),
            f"{cli} run read {report_a['id']}@1",
            f"{cli} run read evidence:{hit['evidence_id']}",
            f"echo {shlex.quote(answer)} | {cli} run finish --answer-file -",
            f"{cli} ledger $DOSSIER_RUN",
        ]
    )
    done = shell(script)
    assert done.returncode == 0 and no_traceback(done), done.stderr
    assert "redemption gates" in done.stdout and "completed" in done.stdout
    assert "2 read, 2 included" in done.stdout

    # Without a lease the commands say so, and print no traceback.
    refused = dossier(stack, token, "run", "catalog", run_id, env=cli_env(stack, token, DOSSIER_RUN_LEASE="rl_bad"))
    assert refused.returncode == 1 and no_traceback(refused) and "forbidden" in refused.stderr
