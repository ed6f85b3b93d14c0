"""An outside agent on the OpenAI Agents SDK: an `Agent` with Dossier's run tools, run by `Runner`.

The agent searches what the run may read, reads passages at their exact versions, keeps a note, and
finishes with an answer that cites what it read; Dossier keeps the ledger, the files and the lease (the
async client renews it in a background task), and publishes the answer with exactly those sources.

    pip install './clients/python[agents]'
    DOSSIER_URL=http://127.0.0.1:8080 DOSSIER_TOKEN=... OPENAI_API_KEY=... \\
        python examples/openai_agents_agent.py WORKSPACE "What changed for Fund X?" --model gpt-4.1-mini

`research` takes any Agents SDK model (a name, or a `Model`); the tests drive this file with a scripted
one (tests/e2e/client_venv/scripted.py).
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from agents import Agent, Model, Runner
from dossier_client import AsyncDossier, Run

INSTRUCTIONS = (
    "You research a question for a team. Search what the run may read, read the passages and earlier "
    "reports that bear on it, keep short notes, then call finish once with a Markdown answer in which every "
    "claim ends with the `cite` of what it rests on, in parentheses. Cite only what you read."
)


async def research(
    dossier: AsyncDossier, workspace_id: str, question: str, model: str | Model, max_turns: int = 20
) -> Run:
    """Drive one external run with an agent on `model` until it calls finish and answers."""
    async with dossier.external_run(workspace_id, question) as run:
        agent = Agent(
            name="Dossier researcher", instructions=INSTRUCTIONS, tools=run.openai_agents_tools(), model=model
        )
        await Runner.run(agent, question, max_turns=max_turns)
        return await run.run()


async def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("workspace")
    parser.add_argument("question")
    parser.add_argument("--model", default="gpt-4.1-mini")
    args = parser.parse_args(argv)
    async with AsyncDossier() as dossier:
        run = await research(dossier, args.workspace, args.question, args.model)
    print(run.model_dump_json(indent=2))
    return 0 if run.status == "completed" else 1


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main(sys.argv[1:])))
