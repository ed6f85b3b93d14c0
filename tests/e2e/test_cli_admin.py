"""`dossier admin token create|list|revoke` against the stack, and where the admin token comes from."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import httpx
import pytest

from tests.support.api import gateway_client, probe
from tests.support.cli import cli_env, dossier, no_traceback
from tests.support.stack import RunningStack


def works(stack: RunningStack, token: str) -> bool:
    r = httpx.get(f"{stack.url}/v1/workspaces", headers={"Authorization": f"Bearer {token}"}, timeout=30)
    return r.status_code == 200


@pytest.mark.local_stack
def test_create_list_revoke_with_the_admin_token_from_dossier_home(stack: RunningStack) -> None:
    scope = f"c{uuid.uuid4().hex[:8]}"
    # Neither --token nor DOSSIER_ADMIN_TOKEN: the CLI reads $DOSSIER_HOME/admin-token, as after `make up`.
    env = cli_env(stack, None, DOSSIER_HOME=str(stack.home))

    created = dossier(None, None, "admin", "token", "create", "--scope", scope, "--principal", "alice", env=env)
    assert created.returncode == 0, created.stderr
    secret = created.stdout.strip()
    assert secret.startswith("dsk_") and "\n" not in secret  # alone on stdout: `export DOSSIER_TOKEN=$(...)`
    assert "for alice in scope" in created.stderr and "expires: never" in created.stderr
    assert works(stack, secret)

    expiring = dossier(
        None,
        None,
        "admin",
        "token",
        "create",
        "--scope",
        scope,
        "--principal",
        "bob",
        "--expires-in",
        "3600",
        "--json",
        env=env,
    )
    issued = json.loads(expiring.stdout)
    assert set(issued) == {"id", "token", "scope", "principal", "expires_at"} and issued["expires_at"]

    listed = dossier(None, None, "admin", "token", "list", "--scope", scope, "--json", env=env)
    items = json.loads(listed.stdout)["items"]
    assert [t["principal"] for t in items] == ["alice", "bob"]
    assert secret not in listed.stdout and issued["token"] not in listed.stdout
    table = dossier(None, None, "admin", "token", "list", "--scope", scope, env=env)
    assert table.stdout.splitlines()[0].split() == ["ID", "SCOPE", "PRINCIPAL", "EXPIRES", "CREATED"]
    assert issued["id"] in table.stdout and "never" in table.stdout

    revoked = dossier(None, None, "admin", "token", "revoke", items[0]["id"], env=env)
    assert revoked.returncode == 0 and revoked.stdout == "", revoked.stderr
    probe(lambda: not works(stack, secret), timeout=5)
    again = dossier(None, None, "admin", "token", "revoke", items[0]["id"], env=env)
    assert again.returncode == 1 and again.stderr.strip() == "dossier: not_found: token not found"


def test_list_follows_every_page(stack: RunningStack) -> None:
    scope = f"p{uuid.uuid4().hex[:8]}"
    auth = {"Authorization": f"Bearer {stack.admin_token}"}
    with gateway_client(base_url=stack.url, headers=auth, timeout=30) as api:
        ids = [
            api.post("/v1/admin/tokens", json={"scope": scope, "principal": f"p{i}"}).json()["id"] for i in range(105)
        ]
    # The route's default page is 100: the CLI must follow next_cursor to show all 105.
    listed = dossier(stack, None, "admin", "token", "list", "--scope", scope, "--json", "--token", stack.admin_token)
    assert listed.returncode == 0, listed.stderr
    page = json.loads(listed.stdout)
    assert [t["id"] for t in page["items"]] == ids and page["next_cursor"] is None


def test_where_the_admin_token_comes_from(stack: RunningStack, tmp_path: Path) -> None:
    user = stack.token(f"u{uuid.uuid4().hex[:8]}")
    args = ("admin", "token", "list", "--scope", "nobody", "--json")
    from_env = dossier(None, None, *args, env=cli_env(stack, user, DOSSIER_ADMIN_TOKEN=stack.admin_token))
    assert from_env.returncode == 0, from_env.stderr  # DOSSIER_TOKEN is a user's: admin commands do not use it

    refused = dossier(
        None, None, *args, "--token", user, env=cli_env(stack, None, DOSSIER_ADMIN_TOKEN=stack.admin_token)
    )
    assert refused.returncode == 1 and "unauthenticated" in refused.stderr  # --token wins, and a user's is refused

    nowhere = dossier(None, None, *args, env=cli_env(stack, None, DOSSIER_HOME=str(tmp_path)))
    assert nowhere.returncode == 2 and no_traceback(nowhere) and "no admin token" in nowhere.stderr

    as_user = dossier(None, None, "workspace", "list", "--json", env=cli_env(stack, stack.admin_token))
    assert as_user.returncode == 1 and "admin token is accepted only" in as_user.stderr


def test_metrics_with_the_admin_token(stack: RunningStack) -> None:
    shown = dossier(stack, None, "admin", "metrics", "--token", stack.admin_token)
    assert shown.returncode == 0, shown.stderr
    assert "# TYPE" in shown.stdout and "dossier_" in shown.stdout
    as_json = dossier(stack, None, "admin", "metrics", "--json", "--token", stack.admin_token)
    assert "# TYPE" in json.loads(as_json.stdout)["text"]
