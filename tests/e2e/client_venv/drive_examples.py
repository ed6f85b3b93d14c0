"""Run in the environment with the client's extras (tests/e2e/test_client_extras.py): one example agent
(examples/langchain_agent.py or examples/openai_agents_agent.py) researches with its scripted model.
Prints the run, the tool schemas the model was given and the refusals it was shown, as JSON."""

from __future__ import annotations

import asyncio
import importlib.metadata
import json
import sys
from pathlib import Path
from typing import Any

import mcp  # noqa: F401 - the client works beside the mcp this environment holds (1.x)
from dossier_client import AsyncDossier, Dossier
from scripted import ScriptedAgentsModel, ScriptedChatModel, refusals

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples"))

import langchain_agent
import openai_agents_agent


def with_langchain(workspace_id: str, question: str, query: str) -> dict[str, Any]:
    chat = ScriptedChatModel(query=query)
    with Dossier() as dossier:
        run = langchain_agent.research(dossier, workspace_id, question, chat)
    return {"run": run.model_dump(mode="json"), "schemas": chat.schemas, "refusals": refusals(chat.seen)}


async def with_agents(workspace_id: str, question: str, query: str) -> dict[str, Any]:
    model = ScriptedAgentsModel(query)
    async with AsyncDossier() as dossier:
        run = await openai_agents_agent.research(dossier, workspace_id, question, model)
    return {"run": run.model_dump(mode="json"), "schemas": model.schemas, "refusals": refusals(model.seen)}


if __name__ == "__main__":
    framework, workspace_id, question, query = sys.argv[1:5]
    if framework == "langchain":
        out = with_langchain(workspace_id, question, query)
    else:
        out = asyncio.run(with_agents(workspace_id, question, query))
    print(json.dumps(out | {"mcp": importlib.metadata.version("mcp")}))
