"""The MCP face at `/mcp`, driven by the official `mcp` SDK's own client over streamable HTTP on the stack."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult, TextResourceContents

from shared.contracts import mcp as contract
from tests.support.api import Api
from tests.support.documents import ANNOUNCEMENT, QUESTION, pdf
from tests.support.logs import lines_with, log_lines
from tests.support.probe import probe_until
from tests.support.stack import ROOT, RunningStack


@asynccontextmanager
async def mcp_client(endpoint: str, headers: dict[str, str], *, mode: str = "auto") -> AsyncIterator[Client]:
    """`auto` negotiates the newest protocol; `legacy` is the initialize handshake older clients use."""
    async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
        async with Client(streamable_http_client(endpoint, http_client=http), mode=mode) as client:
            yield client


def bearer(token: str, **extra: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}", **extra}


def ok(result: CallToolResult) -> Any:
    assert not result.is_error, result.content
    # The same answer as text, for clients that read only content.
    assert json.loads(result.content[0].text) == result.structured_content  # type: ignore[union-attr]
    return result.structured_content


def error(result: CallToolResult) -> dict[str, Any]:
    assert result.is_error, result.structured_content
    body = result.structured_content["error"]
    assert json.loads(result.content[0].text) == {"error": body}  # type: ignore[union-attr]
    return dict(body)


@pytest.fixture
def api(stack: RunningStack) -> Api:
    return Api(stack)


async def test_running_example_through_mcp(api: Api, stack: RunningStack) -> None:
    ws = api.workspace()
    a1 = api.publish("Report A: Fund X liquidity", "Fund X can meet redemptions within 30 days.", ws["id"])
    api.revise(a1["id"], "Fund X liquidity is now weaker; redemptions may take 90 days.", 1)
    assert api.upload(pdf(ANNOUNCEMENT), "announcement", "announcement.pdf", ws["id"])["status"] == "active"
    # A publication reaches its workspace's catalog through an event: wait for it, as a reader would.
    api.wait_catalog(ws["id"], 2)
    token = api.http.headers["Authorization"].removeprefix("Bearer ")

    async with mcp_client(f"{stack.url}/mcp", bearer(token)) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert set(tools) == {t.name for t in contract.TOOLS}
        assert set(tools["start_run"].input_schema["required"]) == {"workspace_id", "question", "request_id"}
        assert tools["read_publication"].annotations.read_only_hint is True  # type: ignore[union-attr]

        assert [w["id"] for w in ok(await client.call_tool("list_workspaces", {}))["items"]] == [ws["id"]]
        shown = ok(await client.call_tool("show_workspace", {"workspace_id": ws["id"]}))
        assert shown["workspace"]["goal"]["version"] == 1 and shown["checkpoint"] is None
        assert {(i["kind"], i["id"]) for i in shown["catalog"]["items"]} >= {("publication", a1["id"])}

        hits = ok(await client.call_tool("search_evidence", {"q": "redemption gates"}))["items"]
        assert hits and hits[0]["source_id"] == "announcement" and hits[0]["version"] == 1
        passage = ok(await client.call_tool("read_evidence", {"evidence_id": hits[0]["evidence_id"]}))
        assert passage["locator"].startswith("page:") and "redemption gates" in passage["text"]

        a_at_1 = ok(await client.call_tool("read_publication", {"id": a1["id"], "version": 1}))
        assert a_at_1["version"] == 1 and a_at_1["body"] == "Fund X can meet redemptions within 30 days."
        [contents] = (await client.read_resource(f"dossier://publications/{a1['id']}/versions/1")).contents
        assert isinstance(contents, TextResourceContents) and json.loads(contents.text) == a_at_1
        [contents] = (await client.read_resource(f"dossier://evidence/{hits[0]['evidence_id']}")).contents
        assert isinstance(contents, TextResourceContents) and json.loads(contents.text) == passage
        templates = {t.uri_template for t in (await client.list_resource_templates()).resource_templates}
        assert templates == {contract.PUBLICATION_VERSION_URI, contract.EVIDENCE_URI}

        request = {
            "workspace_id": ws["id"],
            "question": QUESTION,
            "request_id": uuid.uuid4().hex,
            "history": [{"publication_id": a1["id"], "version": 1}],
        }
        started = ok(await client.call_tool("start_run", request))
        assert started["created"] is True
        again = ok(await client.call_tool("start_run", request))
        assert again["created"] is False and again["run"]["id"] == started["run"]["id"]
        other = error(await client.call_tool("start_run", request | {"question": "Something else?"}))
        assert other["code"] == "conflict"

        run_id = started["run"]["id"]

        async def finished() -> dict[str, Any] | None:
            run = ok(await client.call_tool("get_run", {"run_id": run_id}))
            return run if run["status"] in ("completed", "failed", "cancelled") else None

        run = await probe_until(finished, timeout=90, interval=0.2)
        assert run["status"] == "completed", run["error"]

        ledger = ok(await client.call_tool("get_ledger", {"run_id": run_id}))["items"]
        reads = {(r["ref"]["kind"], r["ref"]["id"], r["ref"]["version"]) for r in ledger if r["stage"] == "read"}
        assert ("publication", a1["id"], 1) in reads and ("publication", a1["id"], 2) not in reads
        assert ("source", "announcement", 1) in reads
        assert ledger == api.ledger(run_id), "MCP and the API answer the same ledger"

        files = {f["path"] for f in ok(await client.call_tool("list_run_files", {"run_id": run_id}))["items"]}
        assert {"plan.md", "draft.md"} <= files
        plan = ok(await client.call_tool("read_run_file", {"run_id": run_id, "path": "plan.md"}))
        assert plan["path"] == "plan.md" and f"{a1['id']}@v1" in plan["text"]

        answer = ok(await client.call_tool("read_publication", run["publication"]))
        assert f"{a1['id']}@1" in answer["body"] and answer["run_id"] == run_id


async def test_checkpoint_proposal_is_compare_and_swap(api: Api, stack: RunningStack) -> None:
    ws = api.workspace()
    token = api.http.headers["Authorization"].removeprefix("Bearer ")
    async with mcp_client(f"{stack.url}/mcp", bearer(token)) as client:
        first = {"workspace_id": ws["id"], "expected_revision": 0, "summary": "Liquidity looks adequate."}
        made = ok(await client.call_tool("propose_checkpoint_update", first | {"add_questions": ["Gates?"]}))
        assert made["revision"] == 1 and made["author"] == "user"
        assert [q["text"] for q in made["open_questions"]] == ["Gates?"]

        stale = error(await client.call_tool("propose_checkpoint_update", first | {"summary": "Late edit."}))
        assert stale["code"] == "conflict" and stale["details"]["current_revision"] == 1

        # An omitted summary keeps the current one, exactly as PUT /checkpoint does.
        question = made["open_questions"][0]["id"]
        resolved = ok(
            await client.call_tool(
                "propose_checkpoint_update",
                {"workspace_id": ws["id"], "expected_revision": 1, "resolve_questions": [question]},
            )
        )
        assert resolved["revision"] == 2 and resolved["summary"] == "Liquidity looks adequate."
        assert resolved["open_questions"][0]["status"] == "resolved"
        shown = ok(await client.call_tool("show_workspace", {"workspace_id": ws["id"]}))
        assert shown["checkpoint"] == api.ok("GET", f"/v1/workspaces/{ws['id']}/checkpoint")


async def test_another_scope_gets_not_found(api: Api, stack: RunningStack) -> None:
    ws = api.workspace()
    a1 = api.publish("Report A", "Fund X can meet redemptions.", ws["id"])
    run = api.start_run(ws["id"], QUESTION)
    outsider = stack.token(f"s{uuid.uuid4().hex[:10]}")
    async with mcp_client(f"{stack.url}/mcp", bearer(outsider)) as client:
        assert ok(await client.call_tool("list_workspaces", {}))["items"] == []
        calls = [
            ("show_workspace", {"workspace_id": ws["id"]}),
            ("read_publication", {"id": a1["id"], "version": 1}),
            ("get_run", {"run_id": run["id"]}),
            ("get_ledger", {"run_id": run["id"]}),
            ("list_run_files", {"run_id": run["id"]}),
            ("propose_checkpoint_update", {"workspace_id": ws["id"], "expected_revision": 0, "summary": "x"}),
            ("start_run", {"workspace_id": ws["id"], "question": QUESTION, "request_id": uuid.uuid4().hex}),
        ]
        for name, arguments in calls:
            assert error(await client.call_tool(name, arguments))["code"] == "not_found", name
        missing = error(await client.call_tool("show_workspace", {"workspace_id": "ws_missing"}))
        assert missing["code"] == "not_found"

        with pytest.raises(MCPError) as refused:
            await client.read_resource(f"dossier://publications/{a1['id']}/versions/1")
        assert refused.value.error.data["error"]["code"] == "not_found"

        # Malformed input is `invalid`, naming the field; a crash never reaches the client.
        bad = error(await client.call_tool("read_publication", {"id": a1["id"], "version": 0}))
        assert bad["code"] == "invalid" and bad["details"]["field"] == "version"
        assert error(await client.call_tool("no_such_tool", {}))["code"] == "invalid"


async def test_reads_are_rechecked_by_their_owner_at_every_call(api: Api, stack: RunningStack) -> None:
    a1 = api.publish("Report A", "Fund X can meet redemptions.")
    token = api.http.headers["Authorization"].removeprefix("Bearer ")
    uri = f"dossier://publications/{a1['id']}/versions/1"
    async with mcp_client(f"{stack.url}/mcp", bearer(token)) as client:
        assert ok(await client.call_tool("read_publication", {"id": a1["id"], "version": 1}))["status"] == "active"
        await client.read_resource(uri)
        api.ok("POST", f"/v1/publications/{a1['id']}/versions/1/withdraw", json={"reason": "wrong data"})
        gone = error(await client.call_tool("read_publication", {"id": a1["id"], "version": 1}))
        assert gone["code"] == "unavailable" and gone["details"]["reason"] == "withdrawn"
        with pytest.raises(MCPError) as refused:
            await client.read_resource(uri)
        assert refused.value.error.data["error"]["code"] == "unavailable"


async def test_every_call_is_logged_with_its_request_id(api: Api, stack: RunningStack) -> None:
    token = api.http.headers["Authorization"].removeprefix("Bearer ")
    request_id = f"mcp-{uuid.uuid4().hex}"
    async with mcp_client(f"{stack.url}/mcp", bearer(token, **{"X-Request-ID": request_id})) as client:
        assert error(await client.call_tool("show_workspace", {"workspace_id": "ws_missing"}))["code"] == "not_found"

    async def logged(process: str) -> list[dict[str, Any]]:
        return lines_with(stack, process, request_id)

    # The gateway logs the call; the id travels in the bus envelope to the service that answered it.
    [call] = [line for line in await probe_until(lambda: logged("gateway"), timeout=10) if "mcp tool" in line["msg"]]
    assert "show_workspace" in call["msg"] and "not_found" in call["msg"] and call["scope"] == api.scope
    workspace = await probe_until(lambda: logged("workspace"), timeout=10)
    assert workspace[0]["scope"] == api.scope

    # Without X-Request-ID each call gets an id of its own, in its log line.
    async with mcp_client(f"{stack.url}/mcp", bearer(token)) as client:
        ok(await client.call_tool("list_workspaces", {}))

    async def unnamed() -> list[dict[str, Any]]:
        calls = [line for line in log_lines(stack, "gateway") if "mcp tool list_workspaces" in line["msg"]]
        return [line for line in calls if line.get("scope") == api.scope and line.get("request_id")]

    assert await probe_until(unnamed, timeout=10)


JSON_RPC = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def test_no_token_or_a_bad_one_is_401(stack: RunningStack) -> None:
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    for auth in ({}, bearer("dsk_" + "x" * 40), bearer("nonsense"), bearer(stack.admin_token)):
        r = httpx.post(f"{stack.url}/mcp", json=call, headers=JSON_RPC | auth)
        assert r.status_code == 401, (auth, r.text)
        assert r.json()["error"]["code"] == "unauthenticated"
        # Never a bare challenge: an MCP client shows the reason instead of starting an OAuth flow.
        challenge = r.headers["www-authenticate"]
        assert challenge.startswith('Bearer error="invalid_token", error_description="'), challenge
        assert r.json()["error"]["message"][:40] in challenge


def test_unstorable_text_is_invalid_and_no_stream_is_left_open(stack: RunningStack) -> None:
    headers = JSON_RPC | bearer(stack.token(f"s{uuid.uuid4().hex[:10]}"))

    def call(arguments: str) -> httpx.Response:
        body = '{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "show_workspace", "arguments": '
        return httpx.post(f"{stack.url}/mcp", content=(body + arguments + "}}").encode(), headers=headers)

    # Written as JSON escapes: U+0000 reaches the tool and is refused there; a lone surrogate is refused by
    # the SDK's JSON parser.
    for arguments, field in (('{"workspace_id": "ws\\u0000"}', "workspace_id"), ('{"x": ["a", "b\\u0000"]}', "x.1")):
        r = call(arguments)
        assert r.status_code == 200, r.text
        result = r.json()["result"]
        assert result["isError"] is True and result["structuredContent"]["error"]["code"] == "invalid"
        assert result["structuredContent"]["error"]["details"]["field"] == field
    assert call('{"workspace_id": "\\ud800"}').status_code == 400, "a lone surrogate is a JSON-RPC parse error"
    # Stateless: nothing is pushed from the server, so a GET stream is refused instead of hanging open.
    assert httpx.get(f"{stack.url}/mcp", headers=headers | {"Accept": "text/event-stream"}).status_code == 405


async def test_sdk_client_without_a_token_cannot_connect(stack: RunningStack) -> None:
    with pytest.raises(ExceptionGroup) as refused:
        async with mcp_client(f"{stack.url}/mcp", {}) as client:
            await client.list_tools()
    # The transport reports the 401 as an MCP error from inside its task group.
    assert refused.group_contains(MCPError, depth=None)


async def test_dossier_mcp_prints_a_working_client_config(stack: RunningStack) -> None:
    token = stack.token(f"s{uuid.uuid4().hex[:10]}")
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOSSIER_")}
    env.update({"DOSSIER_URL": stack.url, "DOSSIER_TOKEN": token})
    command = [sys.executable, "-m", "dossier_cli", "mcp"]
    printed = await asyncio.to_thread(
        subprocess.run, command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert printed.returncode == 0, printed.stderr
    server = json.loads(printed.stdout)["mcpServers"]["dossier"]
    assert server["url"] == f"{stack.url}/mcp" and server["type"] == "http"
    async with mcp_client(server["url"], server["headers"], mode="legacy") as client:
        assert ok(await client.call_tool("list_workspaces", {}))["items"] == []
