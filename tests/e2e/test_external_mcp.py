"""An outside agent drives a run over MCP with the official `mcp` client: the run_* tools answer as the
HTTP routes of an external run do, and their errors are tool errors with the same codes."""

from __future__ import annotations

import uuid

import pytest

from shared.contracts import mcp as contract
from tests.e2e.test_external_runs import setting, stages
from tests.e2e.test_mcp import bearer, error, mcp_client, ok
from tests.support.api import Api
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
