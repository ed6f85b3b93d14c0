"""A run session's calls as tools of agent frameworks: search, read, write a note, finish.

Each tool takes only its own arguments; the session holds the run and its lease, so neither is ever in
a model's context. A refusal the model can act on (a bad id, an unreadable version, a citation of
something the run did not read) is the tool's result, as the API's error envelope; a refusal that ends
the session (the lease lost, a limit reached) is raised to the program running the agent.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import Field

from dossier_client import models as m
from dossier_client.errors import DossierError, Invalid, NotFound, TooLarge, Unavailable

if TYPE_CHECKING:
    from dossier_client.aio_session import AsyncRunSession
    from dossier_client.session import RunSession

Query = Annotated[str, Field(min_length=1, max_length=1000, description="What to look for, in a few words")]
Limit = Annotated[int, Field(ge=1, le=50, description="How many passages at most (1 to 50)")]
ReadTarget = Annotated[
    str,
    Field(
        min_length=1,
        max_length=300,
        description="The `read` value of a search hit: an evidence id, or `pub_…@vN` for a publication version",
    ),
]
NoteName = Annotated[
    str,
    Field(
        pattern=r"^[A-Za-z0-9_.@-]{1,120}$",
        description="The note's name (letters, digits, `_`, `.`, `@`, `-`); it is kept as notes/<name>.md",
    ),
]
NoteText = Annotated[str, Field(min_length=1, max_length=100_000, description="The note, in Markdown")]
Answer = Annotated[
    str,
    Field(
        min_length=1,
        max_length=200_000,
        description="The answer in Markdown; after each claim, the `cite` of the passage it rests on",
    ),
]
Title = Annotated[str | None, Field(max_length=300, description="A short title for the published answer")]

DESCRIPTIONS = {
    "search": "Search what this research run may read: passages of the workspace's sources and earlier "
    "publications. Each hit has a snippet and a `read` value to pass to the read tool.",
    "read": "Read one search hit at its exact version. Returns its text and `cite`, the citation to write "
    "after each claim of the answer that rests on it.",
    "write_note": "Keep a note in the run's working files (replaces a note of the same name).",
    "finish": "Publish the final answer and end the run; call it once, at the end. Cite each claim with the "
    "`cite` of a passage you read, e.g. (announcement@v1 page:1) or (pub_…@v2): citing anything this run did "
    "not read is refused.",
}
# What the model can correct by calling again differently; anything else ends the agent's session.
RECOVERABLE = (Invalid, NotFound, Unavailable, TooLarge)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _hits(hits: list[m.Hit]) -> str:
    return _json(
        [
            {
                "read": h.key,
                "kind": "passage" if h.evidence_id else "publication",
                "source": f"{h.ref.id}@v{h.ref.version}",
                "locator": h.locator,
                "snippet": h.snippet,
            }
            for h in hits
        ]
    )


def _passage(p: m.Passage) -> str:
    return _json({"cite": p.cite(), "text": p.text})


def _finished(run: m.Run) -> str:
    publication = run.publication.model_dump() if run.publication else None
    return _json({"status": run.status, "publication": publication, "error": run.error})


def _refused(error: DossierError) -> str:
    if isinstance(error, RECOVERABLE):
        return _json(error.envelope())
    raise error


def _note_path(name: str) -> str:
    return f"notes/{name.removesuffix('.md')}.md"


def _functions(session: RunSession) -> list[Callable[..., str]]:
    def search(query: Query, limit: Limit = 10) -> str:
        try:
            return _hits(session.search(query, limit))
        except DossierError as exc:
            return _refused(exc)

    def read(ref: ReadTarget) -> str:
        try:
            return _passage(session.read(ref))
        except DossierError as exc:
            return _refused(exc)

    def write_note(name: NoteName, text: NoteText) -> str:
        try:
            session.write(_note_path(name), text)
            return _json({"written": _note_path(name)})
        except DossierError as exc:
            return _refused(exc)

    def finish(answer: Answer, title: Title = None) -> str:
        try:
            return _finished(session.finish(answer, title=title))
        except DossierError as exc:
            return _refused(exc)

    return [search, read, write_note, finish]


def _coroutines(session: AsyncRunSession) -> list[Callable[..., Any]]:
    async def search(query: Query, limit: Limit = 10) -> str:
        try:
            return _hits(await session.search(query, limit))
        except DossierError as exc:
            return _refused(exc)

    async def read(ref: ReadTarget) -> str:
        try:
            return _passage(await session.read(ref))
        except DossierError as exc:
            return _refused(exc)

    async def write_note(name: NoteName, text: NoteText) -> str:
        try:
            await session.write(_note_path(name), text)
            return _json({"written": _note_path(name)})
        except DossierError as exc:
            return _refused(exc)

    async def finish(answer: Answer, title: Title = None) -> str:
        try:
            return _finished(await session.finish(answer, title=title))
        except DossierError as exc:
            return _refused(exc)

    return [search, read, write_note, finish]


def _session_functions(session: RunSession | AsyncRunSession) -> tuple[list[Callable[..., Any]], bool]:
    from dossier_client.aio_session import AsyncRunSession

    if isinstance(session, AsyncRunSession):
        return _coroutines(session), True
    return _functions(session), False


def langchain_tools(session: RunSession | AsyncRunSession) -> list[Any]:
    """The tools as `langchain_core.tools.StructuredTool`s (sync for a `RunSession`, async for an
    `AsyncRunSession`), their argument schemas read from the functions' annotations."""
    try:
        from langchain_core.tools import StructuredTool
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("LangChain tools need langchain-core: pip install 'dossier-client[langchain]'") from exc
    functions, is_async = _session_functions(session)
    return [
        StructuredTool.from_function(
            **({"coroutine": fn} if is_async else {"func": fn}),
            name=fn.__name__,
            description=DESCRIPTIONS[fn.__name__],
        )
        for fn in functions
    ]


def openai_agents_tools(session: RunSession | AsyncRunSession) -> list[Any]:
    """The tools as OpenAI Agents SDK `FunctionTool`s (`agents.function_tool`). A refusal that ends the
    session is raised out of the agent's run instead of being shown to the model."""
    try:
        from agents import function_tool
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("Agents SDK tools need openai-agents: pip install 'dossier-client[agents]'") from exc
    functions, _ = _session_functions(session)
    return [
        function_tool(
            fn,
            name_override=fn.__name__,
            description_override=DESCRIPTIONS[fn.__name__],
            use_docstring_info=False,
            failure_error_function=None,
        )
        for fn in functions
    ]
