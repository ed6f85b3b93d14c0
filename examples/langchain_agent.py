"""An outside agent on LangChain: a chat model with Dossier's run tools, in a plain tool-calling loop.

The model searches what the run may read, reads passages at their exact versions, keeps a note, and
finishes with an answer that cites what it read; Dossier keeps the ledger, the files and the lease (the
client renews it in the background), and publishes the answer with exactly those sources.

    pip install './clients/python[langchain]' langchain-openai
    DOSSIER_URL=http://127.0.0.1:8080 DOSSIER_TOKEN=... OPENAI_API_KEY=... \\
        python examples/langchain_agent.py WORKSPACE "What changed for Fund X?" --model gpt-4.1-mini

Any LangChain chat model that supports tool calling works: pass it to `research`. The tests drive this
file with a scripted model (tests/e2e/client_venv/scripted.py).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from dossier_client import Dossier, Run
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

INSTRUCTIONS = (
    "You research a question for a team. Search what the run may read, read the passages and earlier "
    "reports that bear on it, keep short notes, then call finish once with a Markdown answer in which every "
    "claim ends with the `cite` of what it rests on, in parentheses. Cite only what you read."
)


def research(dossier: Dossier, workspace_id: str, question: str, model: BaseChatModel, max_turns: int = 20) -> Run:
    """Drive one external run with `model` until it calls finish (or `max_turns` model turns pass)."""
    with dossier.external_run(workspace_id, question) as run:
        tools = {tool.name: tool for tool in run.langchain_tools()}
        chat = model.bind_tools(list(tools.values()))
        messages: list[BaseMessage] = [SystemMessage(INSTRUCTIONS), HumanMessage(question)]
        for _ in range(max_turns):
            reply = chat.invoke(messages)
            messages.append(reply)
            calls: list[Any] = getattr(reply, "tool_calls", [])
            if not calls:
                break
            # Invoked with the model's tool call, a tool answers the ToolMessage that goes back to the model.
            messages.extend(tools[call["name"]].invoke(call) for call in calls)
        return run.run()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("workspace")
    parser.add_argument("question")
    parser.add_argument("--model", default="gpt-4.1-mini", help="an OpenAI chat model (langchain-openai)")
    args = parser.parse_args(argv)
    from langchain_openai import ChatOpenAI  # not a dependency of the client: any chat model will do

    with Dossier() as dossier:
        run = research(dossier, args.workspace, args.question, ChatOpenAI(model=args.model))
    print(run.model_dump_json(indent=2))
    return 0 if run.status == "completed" else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
