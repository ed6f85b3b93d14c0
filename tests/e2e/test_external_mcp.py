"""An outside agent drives a run over MCP with the official `mcp` client: the run_* tools answer as the
HTTP routes of an external run do, and their errors are tool errors with the same codes. Within an MCP
session, the session holds the run and its lease, and the model never passes nor sees the lease."""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
import pytest
from mcp import Client
from mcp_types import TextContent

from shared.contracts import mcp as contract
from tests.e2e.test_external_runs import setting, stages
from tests.e2e.test_mcp import bearer, error, mcp_client, ok
from tests.support.api import Api, gateway_client
from tests.support.stack import RunningStack


@pytest.fixture
def api(stack: RunningStack) -> Api:
    return Api(stack)


async def test_an_outside_agent_drives_a_run_through_mcp(api: Api, stack: RunningStack) -> None:
    ws, a, b = setting(api)
    token = api.http.headers["Authorization"].removeprefix("Bearer ")
    async with mcp_client(f"{stack.url}/mcp", bearer(token)) as client:
        tools = {t.name for t in (await client.list_tools()).tools}
        assert {t.name for t in contract.TOOLS} == tools
        assert {"begin_run", "run_catalog", "run_search", "run_read", "write_run_file"} <= tools
        assert {"renew_lease", "take_over_run", "finish_run"} <= tools

        begin = {"workspace_id": ws["id"], "question": "Does the gate change Report A?", "request_id": uuid.uuid4().hex}
        blank = error(await client.call_tool("begin_run", begin | {"question": " \t "}))
        assert blank["code"] == "invalid", blank
        run = ok(await client.call_tool("begin_run", begin | {"history": [{"publication_id": a["id"], "version": 1}]}))
        assert run["driver"] == "external" and run["status"] == "running"
        session = {"run_id": run["id"], "lease": run["lease"]["token"]}

        assert (
            error(await client.call_tool("run_catalog", {"run_id": run["id"], "lease": "rl_x"}))["code"] == "forbidden"
        )
        assert len(ok(await client.call_tool("run_catalog", session))["items"]) == 3
        hit = ok(await client.call_tool("run_search", session | {"q": "redemption gates"}))["items"][0]
        pub = ok(
            await client.call_tool("run_read", session | {"ref": {"kind": "publication", "id": a["id"], "version": 1}})
        )
        passage = ok(
            await client.call_tool("run_read", session | {"ref": {"kind": "evidence", "id": hit["evidence_id"]}})
        )
        again = ok(
            await client.call_tool("run_read", session | {"ref": {"kind": "evidence", "id": hit["evidence_id"]}})
        )
        assert again == passage
        ok(await client.call_tool("write_run_file", session | {"path": "plan.md", "text": "# Plan\n- A@1, the gate"}))
        ok(await client.call_tool("write_run_file", session | {"path": "notes/announcement.md", "text": "Gated."}))
        assert (
            error(await client.call_tool("write_run_file", session | {"path": "x.md", "text": "x"}))["code"]
            == "invalid"
        )

        taken = ok(await client.call_tool("take_over_run", {"run_id": run["id"], "force": True}))
        stale = error(await client.call_tool("write_run_file", session | {"path": "draft.md", "text": "old"}))
        assert stale["code"] == "conflict" and stale["details"]["current_epoch"] == 2
        session = {"run_id": run["id"], "lease": taken["lease"]["token"]}
        assert ok(await client.call_tool("renew_lease", session))["epoch"] == 2

        refused = error(await client.call_tool("finish_run", session | {"answer": f"- B says so ({b['id']}@v1)."}))
        assert refused["code"] == "invalid" and refused["details"]["refs"][0]["id"] == b["id"]
        answer = (
            f"- Fund X can meet redemptions within 30 days ({a['id']}@v1).\n"
            f"- The board introduces redemption gates of 10 percent per quarter (announcement@v1 {hit['locator']}).\n"
        )
        done = ok(await client.call_tool("finish_run", session | {"answer": answer}))
    assert done["status"] == "completed"
    assert pub["path"] != passage["path"]
    publication = api.ok("GET", f"/v1/publications/{done['publication']['id']}/versions/1")
    included = {(s[1], s[2], s[3]) for s in stages(api, run["id"]) if s[0] == "included"}
    assert included == {(r["kind"], r["id"], r["version"]) for r in publication["sources"]}
    assert included == {("publication", a["id"], 1), ("source", "announcement", 1)}
    reads = [s for s in stages(api, run["id"]) if s[0] == "read"]
    assert len(reads) == 2, "the repeated read is recorded once"


async def test_an_mcp_session_holds_its_run_and_the_model_never_sees_the_lease(api: Api, stack: RunningStack) -> None:
    ws, a, _ = setting(api)
    token = api.http.headers["Authorization"].removeprefix("Bearer ")
    answers: list[str] = []

    async def call(client: Client, name: str, arguments: dict[str, Any]) -> Any:
        result = await client.call_tool(name, arguments)
        answers.extend(c.text for c in result.content if isinstance(c, TextContent))
        return result

    # `legacy`: the initialize handshake, whose answer assigns the session (protocol 2026-07-28 keeps none).
    async with mcp_client(f"{stack.url}/mcp", bearer(token), mode="legacy") as client:
        begin = {
            "workspace_id": ws["id"],
            "question": "Does the gate change Report A?",
            "request_id": uuid.uuid4().hex,
            "history": [{"publication_id": a["id"], "version": 1}],
            "agent": {"name": "scripted agent", "model": "none"},
        }
        run = ok(await call(client, "begin_run", begin))
        assert run["lease"] is None and run["lease_state"]["epoch"] == 1, "the session holds the lease"
        assert run["agent"] == {"name": "scripted agent", "model": "none"}

        # The run tools take only their own arguments.
        assert len(ok(await call(client, "run_catalog", {}))["items"]) == 3
        hits = ok(await call(client, "run_search", {"q": "redemption gates"}))["items"]
        passage = ok(await call(client, "run_read", {"ref": {"kind": "evidence", "id": hits[0]["evidence_id"]}}))
        ok(await call(client, "run_read", {"ref": {"kind": "publication", "id": a["id"], "version": 1}}))
        ok(await call(client, "write_run_file", {"path": "plan.md", "text": "# Plan\n- A@1, the gate"}))
        renewed = ok(await call(client, "renew_lease", {"run_id": run["id"]}))
        assert renewed["token"] is None and renewed["epoch"] == 1
        refused = error(await call(client, "run_read", {"ref": {"kind": "source", "id": "announcement", "version": 1}}))
        assert refused["code"] == "invalid", "run_read takes only what it advertises"

        # Another session of the same token holds nothing; a lease it does not hold names the argument.
        async with mcp_client(f"{stack.url}/mcp", bearer(token), mode="legacy") as other:
            unheld = error(await other.call_tool("run_catalog", {}))
            assert unheld["code"] == "forbidden" and unheld["details"] == {"field": "lease"}
            wrong = error(await other.call_tool("run_catalog", {"run_id": run["id"], "lease": "rl_not-the-lease"}))
            assert wrong["code"] == "forbidden" and wrong["details"] == {"field": "lease"}
            assert "X-Run-Lease" not in json.dumps(wrong)

        answer = (
            f"- Fund X can meet redemptions within 30 days ({a['id']}@v1).\n"
            f"- The board introduces redemption gates ({passage['ref']['id']}@v1 {passage['locator']}).\n"
        )
        done = ok(await call(client, "finish_run", {"answer": answer}))
    assert done["status"] == "completed" and done["agent"]["name"] == "scripted agent"
    assert not [text for text in answers if "rl_" in text], "no answer held the lease token"
    included = {(s[1], s[2]) for s in stages(api, run["id"]) if s[0] == "included"}
    assert included == {("publication", a["id"]), ("source", "announcement")}


JSON_RPC = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}},
}


def tool_call(http: httpx.Client, session: str, token: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    headers = JSON_RPC | bearer(token) | {"Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-06-18"}
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
    r = http.post("/mcp", json=call, headers=headers)
    assert r.status_code == 200, r.text
    return dict(r.json()["result"])


def test_a_session_id_alone_opens_nothing_and_take_over_moves_the_run(api: Api, stack: RunningStack) -> None:
    ws, _, _ = setting(api)
    token = api.http.headers["Authorization"].removeprefix("Bearer ")
    colleague = stack.token(api.scope, principal="colleague")
    with gateway_client(base_url=stack.url, timeout=60) as http:
        opened = http.post("/mcp", json=INITIALIZE, headers=JSON_RPC | bearer(token))
        assert opened.status_code == 200, opened.text
        session = opened.headers["mcp-session-id"]
        begin = {"workspace_id": ws["id"], "question": "Gates?", "request_id": uuid.uuid4().hex, "reveal_lease": True}
        run = tool_call(http, session, token, "begin_run", begin)["structuredContent"]
        assert run["lease"]["token"].startswith("rl_"), "reveal_lease answers the token"
        assert not tool_call(http, session, token, "run_catalog", {})["isError"]

        # The same session id with another token of the scope: no run is held there.
        stolen = tool_call(http, session, colleague, "run_catalog", {})
        assert stolen["isError"] and stolen["structuredContent"]["error"]["code"] == "forbidden"

        # The colleague takes the run over in a session of its own, which then holds the new lease.
        theirs = http.post("/mcp", json=INITIALIZE, headers=JSON_RPC | bearer(colleague)).headers["mcp-session-id"]
        taken = tool_call(http, theirs, colleague, "take_over_run", {"run_id": run["id"], "force": True})
        lease = taken["structuredContent"]["lease"]
        assert lease["token"] is None and lease["epoch"] == 2
        assert not tool_call(http, theirs, colleague, "run_catalog", {})["isError"]
        fenced = tool_call(http, session, token, "run_catalog", {})["structuredContent"]["error"]
        assert fenced["code"] == "conflict" and fenced["details"]["current_epoch"] == 2

        # Ending a session forgets what it held; the run goes on.
        headers = bearer(colleague) | {"Mcp-Session-Id": theirs}
        assert http.delete("/mcp", headers=headers).status_code == 204
        forgotten = tool_call(http, theirs, colleague, "run_catalog", {})["structuredContent"]["error"]
        assert forgotten["code"] == "forbidden"
    assert api.ok("GET", f"/v1/runs/{run['id']}")["status"] == "running"


async def test_a_client_without_protocol_sessions_may_name_its_own(api: Api, stack: RunningStack) -> None:
    ws = api.workspace()
    token = api.http.headers["Authorization"].removeprefix("Bearer ")
    begin = {"workspace_id": ws["id"], "question": "Gates?", "request_id": uuid.uuid4().hex}
    # Protocol 2026-07-28 (what `auto` negotiates) has no sessions: without one, the lease is answered.
    async with mcp_client(f"{stack.url}/mcp", bearer(token)) as client:
        run = ok(await client.call_tool("begin_run", begin))
        assert run["lease"]["token"].startswith("rl_")
        assert error(await client.call_tool("run_catalog", {}))["details"] == {"field": "lease"}
    # With a session id of its own, the session holds the run.
    named = bearer(token, **{"Mcp-Session-Id": f"agent-{uuid.uuid4().hex}"})
    async with mcp_client(f"{stack.url}/mcp", named) as client:
        run = ok(await client.call_tool("begin_run", begin | {"request_id": uuid.uuid4().hex}))
        assert run["lease"] is None
        assert ok(await client.call_tool("run_catalog", {}))["items"] == []
