"""The `dossier` command's own behaviour: version, help, exit codes, overrides, and no traceback for any input."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib.metadata import version
from pathlib import Path

import httpx
import pytest

from devstack.procs import free_port
from tests.support.api import probe
from tests.support.cli import cli_env, dossier, no_traceback
from tests.support.stack import ROOT, RunningStack


def test_version_and_help() -> None:
    shown = dossier(None, None, "--version")
    assert shown.returncode == 0 and shown.stdout.strip() == f"dossier {version('dossier')}"

    bare = dossier(None, None)
    assert bare.returncode == 0 and bare.stdout.startswith("Usage: dossier")
    for text in ("workspace", "ingest", "admin", "Exit codes", "3 the gateway cannot", "--json"):
        assert text in bare.stdout, text
    assert dossier(None, None, "--help").stdout == bare.stdout

    group = dossier(None, None, "run", "--help")
    assert group.returncode == 0 and "start" in group.stdout and "ledger" in group.stdout
    up = dossier(None, None, "up", "--help")
    assert up.returncode == 0 and "same as `make up`" in up.stdout
    unknown = dossier(None, None, "workspace", "frobnicate")
    assert unknown.returncode == 2 and no_traceback(unknown)


def test_unreachable_gateway_exits_3() -> None:
    env = cli_env(None, "dsk_whatever", DOSSIER_URL=f"http://127.0.0.1:{free_port()}")
    done = dossier(None, None, "workspace", "list", "--json", env=env)
    assert done.returncode == 3 and done.stdout == "" and no_traceback(done)
    assert done.stderr.startswith("dossier: cannot reach the gateway at http://127.0.0.1:")


@pytest.mark.parametrize("url", ["not a url", "ftp://127.0.0.1:1", "http://"])
def test_a_malformed_url_is_a_usage_error(url: str) -> None:
    done = dossier(None, "dsk_whatever", "workspace", "list", "--url", url)
    assert done.returncode == 2 and no_traceback(done) and "dossier: the gateway URL" in done.stderr


def test_no_token_is_a_usage_error() -> None:
    done = dossier(None, None, "workspace", "list")
    assert done.returncode == 2 and no_traceback(done) and "DOSSIER_TOKEN" in done.stderr


def test_publication_create_with_a_missing_body_file(stack: RunningStack, tmp_path: Path) -> None:
    token = stack.token(f"s{uuid.uuid4().hex[:8]}")
    missing = dossier(stack, token, "publication", "create", "--title", "A", "--body-file", "missing.md")
    assert missing.returncode == 2 and no_traceback(missing)
    assert missing.stderr.strip() == "dossier: missing.md: no such file"
    directory = dossier(stack, token, "publication", "create", "--title", "A", "--body-file", str(tmp_path))
    assert directory.returncode == 2 and no_traceback(directory) and "is a directory" in directory.stderr
    (tmp_path / "latin1.md").write_bytes("caf\xe9".encode("latin-1"))
    binary = dossier(stack, token, "publication", "create", "--title", "A", "--body-file", str(tmp_path / "latin1.md"))
    assert binary.returncode == 2 and no_traceback(binary) and "not UTF-8" in binary.stderr


def test_url_and_token_options_override_the_environment(stack: RunningStack) -> None:
    token = stack.token(f"s{uuid.uuid4().hex[:8]}")
    dead = f"http://127.0.0.1:{free_port()}"
    env = cli_env(None, "dsk_notatokennotatokennotatoken", DOSSIER_URL=dead)
    on_command = dossier(None, None, "workspace", "list", "--json", "--url", stack.url, "--token", token, env=env)
    assert on_command.returncode == 0, on_command.stderr
    assert json.loads(on_command.stdout)["items"] == []
    on_root = dossier(None, None, "--url", stack.url, "--token", token, "workspace", "list", "--json", env=env)
    assert on_root.returncode == 0 and json.loads(on_root.stdout)["items"] == []

    wrong = dossier(stack, token, "workspace", "list", "--json", "--token", "dsk_notatokennotatokennotatoken")
    assert wrong.returncode == 1 and wrong.stderr.startswith("dossier: unauthenticated:")
    assert json.loads(wrong.stdout)["error"]["code"] == "unauthenticated"  # --json: the envelope on stdout


class _NotAGateway(BaseHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        status = 502 if "workspaces" in self.path else 200
        body = b"<html>Bad gateway</html>"
        self.send_response(status)
        self.send_header("content-type", "text/html")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def not_a_gateway() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _NotAGateway)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_replies_that_are_not_json(not_a_gateway: str) -> None:
    error = dossier(None, "dsk_x", "workspace", "list", "--url", not_a_gateway)
    assert error.returncode == 1 and no_traceback(error)
    assert "HTTP 502" in error.stderr and "not an error envelope" in error.stderr
    ok_but_html = dossier(None, "dsk_x", "run", "show", "run_1", "--url", not_a_gateway)
    assert ok_but_html.returncode == 1 and no_traceback(ok_but_html) and "is not JSON" in ok_but_html.stderr
    health = dossier(None, None, "health", "--url", not_a_gateway)
    assert health.returncode == 1 and no_traceback(health) and "not understood" in health.stderr


def test_ctrl_c_while_waiting_for_the_gateway(tmp_path: Path) -> None:
    """A gateway that accepts and never answers: Ctrl-C ends the command with 130 and one line."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    accepted: list[socket.socket] = []

    def accept() -> None:
        conn, _ = listener.accept()
        accepted.append(conn)

    threading.Thread(target=accept, daemon=True).start()
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "dossier_cli", "workspace", "list", "--url", url, "--token", "dsk_x"],
        cwd=ROOT,
        env=cli_env(None, None),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # As a terminal starts it: a shell's background job (a CI script run with `&`) ignores SIGINT, and an
        # ignored signal stays ignored across exec, so Ctrl-C would never reach the command.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        probe(lambda: accepted, timeout=60)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for conn in accepted:
            conn.close()
        listener.close()
    assert proc.returncode == 130 and stdout == ""
    assert stderr.strip() == "dossier: interrupted"


def test_json_output_of_publication_commands(stack: RunningStack) -> None:
    token = stack.token(f"s{uuid.uuid4().hex[:8]}")

    def run(*args: str, stdin: str | None = None) -> dict[str, object]:
        done = dossier(stack, token, *args, "--json", stdin=stdin)
        assert done.returncode == 0, done.stderr
        return dict(json.loads(done.stdout))

    v1 = run("publication", "create", "--title", "Report A", "--body-file", "-", stdin="Fund X can meet redemptions.")
    assert v1["version"] == 1 and v1["body"] == "Fund X can meet redemptions."
    v2 = run("publication", "revise", str(v1["id"]), "--body-file", "-", stdin="Fund X cannot.")
    assert v2["version"] == 2
    assert run("publication", "show", str(v1["id"]))["latest_version"] == 2
    assert run("publication", "read", str(v1["id"]))["body"] == "Fund X cannot."
    assert run("publication", "show", str(v1["id"]), "--version", "1")["body"] == "Fund X can meet redemptions."
    withdrawn = run("publication", "withdraw", str(v1["id"]), "1", "--reason", "superseded")
    assert withdrawn["status"] == "withdrawn"
    gone = dossier(stack, token, "publication", "read", str(v1["id"]), "1", "--json")
    assert gone.returncode == 1 and json.loads(gone.stdout)["error"]["details"]["reason"] == "withdrawn"
    stale = dossier(
        stack,
        token,
        "publication",
        "revise",
        str(v1["id"]),
        "--body-file",
        "-",
        "--expected-latest-version",
        "1",
        stdin="x",
    )
    assert stale.returncode == 1 and "conflict" in stale.stderr

    health = run("health")
    assert health["status"] == "ok" and set(health["services"]) >= {"workspace", "runhost"}


def test_refusals_in_words_a_user_reads(stack: RunningStack) -> None:
    """Issue 39: an empty title answered pydantic's phrase, an id with a slash "Not Found"."""
    token = stack.token(f"s{uuid.uuid4().hex[:8]}")
    empty = dossier(stack, token, "workspace", "create", "--title", "", "--goal", "A goal")
    assert empty.returncode == 1 and no_traceback(empty), empty.stderr
    assert empty.stderr.strip() == "dossier: invalid: title: must not be empty"
    slashed = dossier(stack, token, "publication", "show", "bad/id")
    assert slashed.returncode == 2 and no_traceback(slashed), slashed.stderr
    assert "'bad/id' is not an id" in slashed.stderr
    auth = {"Authorization": f"Bearer {token}"}
    lost = httpx.get(f"{stack.url}/v1/publications/bad%2Fid", headers=auth)
    assert lost.status_code == 404 and lost.json()["error"]["message"].startswith(
        "there is nothing at /v1/publications/"
    )
    question = {"question": "x" * 5000, "request_id": "r1"}
    too_long = httpx.post(f"{stack.url}/v1/workspaces/ws_x/runs", headers=auth, json=question)
    assert too_long.status_code == 422
    assert too_long.json()["error"]["message"] == "question: too long: 5,000 characters, the limit is 4,000"
