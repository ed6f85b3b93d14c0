"""An outside agent that researches through Dossier over MCP, with the official `mcp` client SDK.

It is scripted (no model): it begins a run it drives itself, lists the run's catalog, searches the evidence,
reads the best passage and every earlier publication of the catalog at its exact version, keeps a plan and a
note in the run's files, and finishes with an answer that cites exactly what it read. Dossier keeps the
ledger, the files and the lease, and publishes the answer with those sources. The MCP session holds the run
and its lease, so no tool call passes either (the lease never enters a model's context).

    DOSSIER_URL=http://127.0.0.1:8080 DOSSIER_TOKEN=... \\
        .venv/bin/python examples/outside_agent.py WORKSPACE "What changed for Fund X?" --query "redemption gates"

Swap the scripted choices below for a model's, and it is an agent of your own.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import uuid
from typing import Any

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client


class ToolRefused(Exception):
    pass


async def call(client: Client, name: str, arguments: dict[str, Any]) -> Any:
    result = await client.call_tool(name, arguments)
    if result.is_error:
        raise ToolRefused(f"{name}: {json.dumps(result.structured_content)}")
    return result.structured_content


async def research(client: Client, workspace_id: str, question: str, query: str) -> dict[str, Any]:
    begin = {
        "workspace_id": workspace_id,
        "question": question,
        "request_id": uuid.uuid4().hex,
        "agent": {"name": "examples/outside_agent.py"},
    }
    run = await call(client, "begin_run", begin)
    # The session holds the lease; a connection without an MCP session is answered the token to pass along.
    session = {} if run["lease"] is None else {"run_id": run["id"], "lease": run["lease"]["token"]}
    lease = run["lease_state"]
    print(f"run {run['id']}: lease epoch {lease['epoch']} until {lease['expires_at']}", file=sys.stderr)

    catalog = await call(client, "run_catalog", session)
    earlier = [i for i in catalog["items"] if i["kind"] == "publication" and i["available"]]
    plan = f"# Plan\n\nQuestion: {question}\n\n- read {len(earlier)} earlier publications\n- search: {query}\n"
    await call(client, "write_run_file", session | {"path": "plan.md", "text": plan})

    findings: list[str] = []
    for item in earlier[:3]:
        ref = {"kind": "publication", "id": item["id"], "version": item["version"]}
        read = await call(client, "run_read", session | {"ref": ref})
        first = read["text"].split("\n\n", 1)[-1].strip().split("\n")[0]
        findings.append(f"- Earlier: {first} ({item['id']}@v{item['version']}).")

    hits = (await call(client, "run_search", session | {"q": query}))["items"]
    evidence: list[str] = []
    if hits:
        passage = await call(client, "run_read", session | {"ref": {"kind": "evidence", "id": hits[0]["evidence_id"]}})
        sentence = passage["text"].split("\n\n", 1)[-1].strip().split(". ")[0].rstrip(".")
        source = passage["ref"]
        evidence.append(f"- {sentence} ({source['id']}@v{source['version']} {passage['locator']}).")
        note = f"{sentence}.\n\nRead at {source['id']}@v{source['version']} {passage['locator']}."
        await call(client, "write_run_file", session | {"path": f"notes/{source['id']}.md", "text": note})

    answer = "\n".join(
        [
            "## What earlier reports concluded",
            *(findings or ["- none in the catalog"]),
            "",
            "## What the new evidence says",
            *(evidence or [f"- nothing matched {query!r}"]),
        ]
    )
    return dict(await call(client, "finish_run", session | {"answer": answer, "title": question[:300]}))


async def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("workspace")
    parser.add_argument("question")
    parser.add_argument("--query", required=True, help="what to search the evidence for")
    parser.add_argument("--url", default=os.environ.get("DOSSIER_URL", "http://127.0.0.1:8080"))
    parser.add_argument("--token", default=os.environ.get("DOSSIER_TOKEN"))
    args = parser.parse_args(argv)
    if not args.token:
        parser.error("a token is needed: --token or DOSSIER_TOKEN")
    headers = {"Authorization": f"Bearer {args.token}"}
    async with httpx2.AsyncClient(headers=headers, timeout=120) as http:
        # `legacy`: the initialize handshake, whose answer assigns the MCP session (protocol 2026-07-28 has none).
        transport = streamable_http_client(f"{args.url.rstrip('/')}/mcp", http_client=http)
        async with Client(transport, mode="legacy") as client:
            try:
                run = await research(client, args.workspace, args.question, args.query)
            except ToolRefused as exc:
                print(f"refused: {exc}", file=sys.stderr)
                return 1
    print(json.dumps(run, indent=2))
    return 0 if run["status"] == "completed" else 1


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main(sys.argv[1:])))
