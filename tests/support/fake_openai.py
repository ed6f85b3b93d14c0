"""A fake OpenAI-compatible `/v1/chat/completions` server, run as its own process in tests.

It speaks the wire format (tool_calls, `stream: false`) and plays a fixed script: a 429 first, then a
valid tool call, then a malformed one (arguments that are not JSON), then — only if the model input
carries the tool error back — a final answer through `finish`. Every request body is kept for assertions
at `GET /requests`.

A request whose question (in the task message) names a scenario, `scenario:<name>[:<seconds>]`, is
answered by that scenario instead, whatever the mode, so one server and one stack play them all:
`narration`, `length_call`, `length_text`, `content_filter`, `empty` (each once, then a normal step),
`repeat` (narration forever), `parallel` and `batch` (three tool calls in one reply), `outage:<seconds>` (503 with
Retry-After for that long from its first request), `errorbody` (a 200 carrying `{"error": ...}` once) and
`trickle` (a reply whose bytes never stop coming), `catalog` (a model that works from catalog.md) and
`pages:<notes>` (a long run: search, read a page of catalog.md, write a long note, until that many notes),
`earlier` (search, read the first earlier publication found, cite it), `endless` (a note after note, never a
finish), `reread` (list the catalog, then read the start of catalog.md again and again), `badcite` (read an
earlier publication, finish citing it and what it never read; once answered back, cite only what it read),
`searchpages` (page through one search by its cursors), `searchrest` (read the rest of a cut search answer
from the file its cut names) and `reach` (read the publication the question names, then finish).

A request with `stream: true` is answered the same, as server-sent `chat.completion.chunk` events: text
in pieces of a few characters, each tool call's arguments in fragments spread over many chunks, the
`finish_reason` in the last chunk with choices, and usage in one more when `stream_options` asks for it.
An error body comes as an `{"error": ...}` event, `trickle` as a stream that sends a piece of text
twice a second and never ends, and `cutstream` as a first stream that stops after three chunks. Each record counts the chunks sent (`chunks`) and says when the client
dropped the stream (`dropped`).

Three scenarios test the client's budget: `stall:<seconds>` (the first request of a run waits that long,
silent, before it answers; the next ones answer at once), `nochoices` (every reply a 200 without choices: a
whole body with `choices: []`, or a stream of only its usage chunk) and `cutdone` (every stream, sent in
HTTP/1.1 chunks, is cut by closing the connection right after the chunk carrying `finish_reason`: no
usage, no `[DONE]`, no last chunk). `bignote` writes a note of 200,000 characters first.

Started with the mode `walk` (`python -m tests.support.fake_openai PORT walk`) it plays a longer script
instead, as a function of the input alone (like a model at temperature zero): the next step follows the
last step the request's window shows, so a resumed run that sends an input again gets the same step.

The tests that run against it share what follows `running`: the pacing of a stack whose runner is killed
mid-run, the requests one run sent, a workspace to run in, and a kill amid the calls of one answer.
"""

from __future__ import annotations

import itertools
import json
import re
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

from devstack.procs import free_port, port_open
from shared.children import wait_until
from tests.support.api import Api, probe
from tests.support.documents import pdf
from tests.support.stack import RunningStack

REQUESTS: list[dict[str, Any]] = []
LOCK = threading.Lock()


def tool_call(name: str, arguments: str, call_id: str, finish_reason: str = "tool_calls") -> dict[str, Any]:
    return tool_calls([(name, arguments, call_id)], finish_reason)


def tool_calls(calls: list[tuple[str, str, str]], finish_reason: str = "tool_calls") -> dict[str, Any]:
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
            for name, arguments, call_id in calls
        ],
    }
    return completion(message, finish_reason)


def completion(message: dict[str, Any], finish_reason: str) -> dict[str, Any]:
    return {
        "id": "cmpl-fake",
        "object": "chat.completion",
        "created": 0,
        "model": "fake",
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110},
    }


def text_reply(content: str | None, finish_reason: str = "stop") -> dict[str, Any]:
    return completion({"role": "assistant", "content": content}, finish_reason)


BIG_NOTE = 200_000  # characters: ten times what a note may hold
SCENARIO = re.compile(r"scenario:([a-z_]+)(?::(\d+))?")
NARRATION = "Let me start by listing the catalog, then I will search the evidence."
SCENARIO_ANSWER = "## What the new evidence says\n- the scenario ran to its finish"
FIRST_SEEN: dict[str, float] = {}
ONCE: dict[str, str] = {
    "narration": NARRATION,
    "length_text": "The answer, in short, is that the liquidity of Fund X was",
}


def scenario_of(body: dict[str, Any]) -> tuple[str, int, str] | None:
    """(name, seconds, the question's line) of a request whose question names a scenario."""
    task = next((str(m.get("content")) for m in body.get("messages", []) if m.get("role") == "user"), "")
    match = SCENARIO.search(task)
    if match is None:
        return None
    # The question's line names the run; the rest of the task message changes from step to step.
    question = next(line for line in task.splitlines() if match[0] in line)
    return match[1], int(match[2] or 0), question


def scenario_answer(name: str, seconds: int, task: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]] | str:
    """A status and body, or "trickle". Each step is a function of the input, as at temperature zero."""
    done = sum(1 for m in body["messages"] if m.get("role") == "assistant")
    with LOCK:
        first = FIRST_SEEN.setdefault(task, time.monotonic())
    if name == "outage" and time.monotonic() - first < seconds:
        return 503, {"error": {"message": "service unavailable", "type": "overloaded"}}
    if name == "stall" and _count(task) == 1:
        # Silent: not even the headers come before the client's deadline.
        time.sleep(seconds)
    if name == "nochoices":
        return 200, completion({"role": "assistant", "content": None}, "stop") | {"choices": []}
    if name == "errorbody" and done == 0 and _count(task) == 1:
        return 200, {"error": {"message": "upstream model crashed", "type": "server_error", "code": 500}}
    if name == "trickle":
        return "trickle"
    if name == "repeat":
        return 200, text_reply(NARRATION)
    if name == "catalog":
        return 200, catalog_walk(body)
    if name == "pages":
        return 200, pages_walk(body, task)
    if name == "earlier":
        return 200, earlier_walk(body, done)
    if name == "endless":
        return 200, tool_call("write_note", json.dumps({"source": f"n{done}", "text": f"note {done}"}), f"end-{done}")
    if name == "reread":
        if done == 0:
            return 200, tool_call("list_catalog", "{}", "re-0")
        return 200, tool_call("read_file", json.dumps({"path": "catalog.md", "limit": 500}), f"re-{done}")
    if name == "badcite":
        return 200, badcite_walk(body, done)
    if name in ("searchpages", "searchrest", "reach"):
        return 200, search_walk(name, body, task)
    if done == 0:
        if name in ONCE:
            return 200, text_reply(ONCE[name], "length" if name == "length_text" else "stop")
        if name == "length_call":
            return 200, tool_call("write_draft", '{"text": "# Draft\\n\\nFund X liquid', "cut-0", "length")
        if name == "content_filter":
            return 200, text_reply(None, "content_filter")
        if name == "empty":
            return 200, text_reply("")
        if name == "bignote":
            return 200, tool_call("write_note", json.dumps({"source": "big", "text": "x" * BIG_NOTE}), "big-0")
        if name == "batch":
            calls = [
                ("list_catalog", "{}", "batch-0"),
                ("write_note", json.dumps({"source": "first", "text": "first of three"}), "batch-1"),
                ("write_note", json.dumps({"source": "second", "text": "second of three"}), "batch-2"),
            ]
            return 200, tool_calls(calls)
        if name == "parallel":
            calls = [
                ("list_catalog", "{}", "par-0"),
                ("search_evidence", json.dumps({"query": "liquidity"}), "par-1"),
                ("write_note", json.dumps({"source": "parallel", "text": "three calls in one reply"}), "par-2"),
            ]
            return 200, tool_calls(calls)
    if name in ("outage", "errorbody", "stall", "cutdone") and done == 0:
        return 200, tool_call("list_catalog", "{}", "s-0")
    proposal = {"summary": f"scenario {name} summary", "add_questions": [f"Did {name} hold?"]}
    arguments = {"answer": SCENARIO_ANSWER, "checkpoint_proposal": proposal}
    return 200, tool_call("finish", json.dumps(arguments), f"s-{done}")


def listed(body: dict[str, Any]) -> bool:
    """Whether catalog.md is among the working files the task message counts."""
    return re.search(r"^Working files: .*\bcatalog\.md \(", str(body["messages"][1]["content"]), re.M) is not None


def catalog_walk(body: dict[str, Any]) -> dict[str, Any]:
    """A model that works from the catalog: list it, read catalog.md, search each source it lists,
    read the first passage of each, and cite them. It sees only its window, so each step follows from
    the working files and the last answers in it."""
    messages = body["messages"]
    turns = [
        (str(c["function"]["name"]), str(a.get("content")))
        for m, a in itertools.pairwise(messages)
        for c in m.get("tool_calls") or []
    ]
    last = turns[-1][0] if turns else ""
    said = "\n".join(answer for name, answer in turns if name == last)
    if not listed(body):
        return tool_call("list_catalog", "{}", "cat-0")
    if last == "list_catalog":
        return tool_call("read_file", json.dumps({"path": "catalog.md", "limit": 3000}), "cat-1")
    if last == "read_file":
        sources = re.findall(r"^- source (\S+)@\d+ ", said, re.M)
        if not sources:
            return tool_call("finish", json.dumps({"answer": "The catalog lists no source."}), "cat-none")
        calls = [
            ("search_evidence", json.dumps({"query": "liquidity", "source_id": s}), f"cat-s{n}")
            for n, s in enumerate(sources)
        ]
        return tool_calls(calls)
    if last == "search_evidence":
        hits = re.findall(r"^- \[source\] (\S+): (\S+)@(\d+) (\S+): ", said, re.M)
        first = {source: evidence for evidence, source, _, _ in reversed(hits)}
        calls = [
            ("read_evidence", json.dumps({"evidence_id": evidence}), f"cat-r{n}")
            for n, evidence in enumerate(first.values())
        ]
        return tool_calls(calls)
    read = sorted(set(re.findall(r"begins: # (\S+)@v(\d+) (\S+)", said)))
    cited = "\n".join(f"- {s} says so ({s}@v{v} {loc})" for s, v, loc in read)
    return tool_call("finish", json.dumps({"answer": f"## What the new evidence says\n{cited}"}), "cat-end")


def publication_found(body: dict[str, Any]) -> re.Match[str] | None:
    """The first earlier publication (id, version) a search in the window found."""
    said = "\n".join(str(m.get("content")) for m in body["messages"] if m.get("role") == "tool")
    return re.search(r"^- \[publication\] (\S+)@(\d+) ", said, re.M)


def earlier_walk(body: dict[str, Any], done: int) -> dict[str, Any]:
    """A model that searches, reads the first earlier publication its search found, and cites it."""
    if done == 0:
        return tool_call("search_evidence", json.dumps({"query": "redemption gate lifted"}), "early-0")
    found = publication_found(body)
    if found is None:
        return tool_call("finish", json.dumps({"answer": "No earlier publication was found."}), "early-none")
    if done == 1:
        return tool_call("read_publication", json.dumps({"id": found[1], "version": int(found[2])}), "early-1")
    answer = f"## What earlier reports concluded\n- the gate was lifted ({found[1]}@{found[2]})"
    return tool_call("finish", json.dumps({"answer": answer}), "early-2")


BADCITE_ANSWER = "## What earlier reports concluded\n- Fund X liquidity is adequate ({pub}@1)."


def badcite_walk(body: dict[str, Any], done: int) -> dict[str, Any]:
    """Search, read the earlier publication found, finish citing it, another version of it and a source
    passage never read; answered back, finish citing only the publication read."""
    found = publication_found(body)
    if done == 0 or found is None:
        return tool_call("search_evidence", json.dumps({"query": "liquidity"}), f"bad-{done}")
    if done == 1:
        return tool_call("read_publication", json.dumps({"id": found[1], "version": 1}), "bad-1")
    answer = BADCITE_ANSWER.format(pub=found[1])
    if done == 2:
        unread = f"\n- It was inadequate before ({found[1]}@2).\n- A source says so (fundx-0@v1 page:1)."
        return tool_call("finish", json.dumps({"answer": answer + unread}), "bad-2")
    return tool_call("finish", json.dumps({"answer": answer}), f"bad-{done}")


SEARCHED = "redemption gates"


def last_step(body: dict[str, Any]) -> tuple[str, str]:
    """The name of the last call the window shows, and its answer as shown."""
    for call, answer in reversed(list(itertools.pairwise(body["messages"]))):
        for c in call.get("tool_calls") or []:
            return str(c["function"]["name"]), str(answer.get("content"))
    return "", ""


def search_walk(name: str, body: dict[str, Any], task: str) -> dict[str, Any]:
    """Models that see only their window: `searchpages` asks for the next page with the cursor a search
    answer's first line gives, until none; `searchrest` reads the rest of a cut search answer where its cut
    says, then each next part where the read says; `reach` reads the publication its question names."""
    last, said = last_step(body)
    step = f"{name}-{sum(1 for m in body['messages'] if m.get('role') == 'tool')}"
    if name == "reach" and not last:
        named = re.search(r"\b(pub_[A-Za-z0-9_-]+)", task)
        assert named is not None, task
        return tool_call("read_publication", json.dumps({"id": named[1], "version": 1}), step)
    if name != "reach" and not last:
        return tool_call("search_evidence", json.dumps({"query": SEARCHED}), step)
    cursor = re.search(r"cursor '([^']+)'", said.partition("\n")[0])
    if name == "searchpages" and last == "search_evidence" and cursor:
        return tool_call("search_evidence", json.dumps({"query": SEARCHED, "cursor": cursor[1]}), step)
    rest = re.search(r"read_file (\S+) offset (\d+) for the rest\]$", said)
    if name == "searchrest" and last == "search_evidence" and rest:
        return tool_call("read_file", json.dumps({"path": rest[1], "offset": int(rest[2]), "limit": 400}), step)
    more = re.match(r"\[(\S+) chars \d+-\d+ of \d+; the rest from offset (\d+)\]", said)
    if name == "searchrest" and last == "read_file" and more:
        return tool_call("read_file", json.dumps({"path": more[1], "offset": int(more[2]), "limit": 400}), step)
    return tool_call("finish", json.dumps({"answer": SCENARIO_ANSWER}), step)


def pages_walk(body: dict[str, Any], task: str) -> dict[str, Any]:
    """A long run that sees only its window: the working files' counts say how far it is, the last tool
    answer what comes next (search, then a page of catalog.md, then a long note)."""
    notes = int(re.search(r"notes/: (\d+) files", str(body["messages"][1]["content"]))[1])  # type: ignore[index]
    wanted = int(SCENARIO.search(task)[2] or 20)  # type: ignore[index]
    last = next((str(c["function"]["name"]) for m in reversed(body["messages"]) for c in m.get("tool_calls") or []), "")
    if not listed(body):
        return tool_call("list_catalog", "{}", "pages-list")
    if notes >= wanted:
        return tool_call("finish", json.dumps({"answer": SCENARIO_ANSWER}), f"pages-end-{notes}")
    if last in ("", "write_note", "list_catalog"):
        return tool_call(
            "search_evidence", json.dumps({"query": "fund liquidity redemption report"}), f"pages-s{notes}"
        )
    if last == "search_evidence":
        return tool_call("read_file", json.dumps({"path": "catalog.md", "offset": notes * 300}), f"pages-r{notes}")
    note = {"source": f"page-{notes}", "text": f"Page {notes} of the catalog, noted at length. " * 120}
    return tool_call("write_note", json.dumps(note), f"pages-n{notes}")


def _count(task: str) -> int:
    with LOCK:
        return sum(1 for r in REQUESTS if r.get("task") == task)


def answer_for(n: int, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    if n == 1:
        return 429, {"error": {"message": "rate limited", "type": "rate_limit"}}
    if n == 2:
        return 200, tool_call("list_catalog", "{}", "call-1")
    if n == 3:
        return 200, tool_call("read_file", '{"path": "plan.md", "offset": ', "call-2")
    last = body["messages"][-2] if len(body["messages"]) >= 2 else {}
    if last.get("role") != "tool" or "not a JSON object" not in str(last.get("content")):
        return 400, {"error": {"message": "the malformed call was not answered back"}}
    arguments = {
        "answer": "## What earlier reports concluded\n- none\n\n## What the new evidence says\n- none\n\n## Not resolved or not read\n- everything",
        "checkpoint_proposal": {"summary": "fake model summary", "add_questions": ["Is the fake model right?"]},
    }
    return 200, tool_call("finish", json.dumps(arguments), "call-3")


WALK = [
    ("list_catalog", {}),
    ("search_evidence", {"query": "liquidity redemption"}),
    ("read_file", {"path": "plan.md", "limit": 400}),
    ("write_draft", {"text": "# Draft\n\nNothing concluded yet."}),
    ("read_file", {"path": "draft.md"}),
    ("write_draft", {"text": "# Draft\n\nFund X: see the catalog."}),
]
WALK_ANSWER = (
    "## What earlier reports concluded\n- none read\n\n## What the new evidence says\n- none read\n\n"
    "## Not resolved or not read\n- everything"
)
MODE: list[str] = ["script"]


def walk_answer(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """The step after the last one the window shows (its call id, `walk-<n>`): a window bounded by size
    drops the oldest steps, so their count says nothing."""
    shown = [
        str(c["id"]) for m in body["messages"] for c in m.get("tool_calls") or [] if str(c["id"]).startswith("walk-")
    ]
    done = int(shown[-1].removeprefix("walk-")) + 1 if shown else 0
    if done < len(WALK):
        name, arguments = WALK[done]
        return 200, tool_call(name, json.dumps(arguments), f"walk-{done}")
    return 200, tool_call("finish", json.dumps({"answer": WALK_ANSWER}), f"walk-{done}")


PIECE = 7  # characters per streamed fragment: every argument of a tool call spans several chunks


def pieces(text: str) -> list[str]:
    # A long text (a `bignote`) comes in at most about 100 pieces, so its stream fits a short deadline.
    size = max(PIECE, len(text) // 100)
    return [text[i : i + size] for i in range(0, len(text), size)]


def chunk(delta: dict[str, Any] | None, finish_reason: str | None = None, **extra: Any) -> dict[str, Any]:
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish_reason}]
    return {
        "id": "cmpl-fake",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "fake",
        "choices": choices,
    } | extra


def chunks_of(payload: dict[str, Any], usage: bool) -> list[dict[str, Any]]:
    """A whole reply as the chunks a streaming server sends for it."""
    if not payload["choices"]:
        return [chunk(None, usage=payload["usage"])] if usage else []
    choice = payload["choices"][0]
    message = choice["message"]
    out = [chunk({"role": "assistant", "content": ""})]
    out += [chunk({"content": piece}) for piece in pieces(message.get("content") or "")]
    for index, call in enumerate(message.get("tool_calls") or []):
        head = {"index": index, "id": call["id"], "type": "function", "function": {"name": call["function"]["name"]}}
        out.append(chunk({"tool_calls": [head]}))
        out += [
            chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
            for piece in pieces(call["function"]["arguments"])
        ]
    out.append(chunk({}, choice["finish_reason"]))
    if usage:
        out.append(chunk(None, usage=payload["usage"]))
    return out


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass

    def _send(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)
        except OSError:
            return  # the client gave up waiting (a `stall` past its deadline)

    def do_GET(self) -> None:
        if self.path == "/requests":
            with LOCK:
                self._send(200, REQUESTS)
        else:
            self._send(404, {"error": "no"})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", "0"))) or b"{}")
        if self.path != "/v1/chat/completions":
            self._send(404, {"error": "no"})
            return
        scenario = scenario_of(body)
        record = {"auth": self.headers.get("authorization"), "body": body, "task": scenario[2] if scenario else None}
        with LOCK:
            REQUESTS.append(record)
            n = len(REQUESTS)
        streamed = body.get("stream") is True
        record["stream"] = streamed
        if scenario is not None:
            answer = scenario_answer(*scenario, body)
            if answer == "trickle":
                self._trickle_stream(record) if streamed else self._trickle()
                return
            status, payload = answer
        else:
            status, payload = walk_answer(body) if MODE[0] == "walk" else answer_for(n, body)
        record["status"] = status
        retry = {"retry-after": "0.2"} if status == 429 else {"retry-after": "1"} if status == 503 else None
        if streamed and status == 200:
            usage = bool((body.get("stream_options") or {}).get("include_usage"))
            events = [payload] if "error" in payload else chunks_of(payload, usage)
            # `cutstream`: the first stream of a run stops after a few chunks, with no finish_reason nor [DONE].
            cut = scenario is not None and scenario[0] == "cutstream" and _count(scenario[2]) == 1
            if scenario is not None and scenario[0] == "cutdone":
                self._events_cut_after_finish(record, events)
                return
            self._events(record, events[:3] if cut else events, done="error" not in payload and not cut)
            return
        self._send(status, payload, retry)

    def _start_events(self) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.end_headers()

    def _event(self, record: dict[str, Any], data: str) -> None:
        self.wfile.write(f"data: {data}\n\n".encode())
        self.wfile.flush()
        with LOCK:
            record["chunks"] = record.get("chunks", 0) + 1

    def _events(self, record: dict[str, Any], events: list[dict[str, Any]], done: bool) -> None:
        """Server-sent events, then `[DONE]`; the connection closes after (HTTP/1.0)."""
        try:
            self._start_events()
            for event in events:
                self._event(record, json.dumps(event))
            if done:
                self.wfile.write(b"data: [DONE]\n\n")
        except OSError:
            with LOCK:
                record["dropped"] = time.time()

    def _events_cut_after_finish(self, record: dict[str, Any], events: list[dict[str, Any]]) -> None:
        """The events up to the one carrying `finish_reason`, as HTTP/1.1 chunks, then the connection is
        closed without the last chunk: the client's transport sees a body cut short."""
        last = next(n for n, e in enumerate(events) if any(c.get("finish_reason") for c in e["choices"]))
        self.protocol_version = "HTTP/1.1"
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        self.close_connection = True
        try:
            for event in events[: last + 1]:
                data = f"data: {json.dumps(event)}\n\n".encode()
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                with LOCK:
                    record["chunks"] = record.get("chunks", 0) + 1
            self.wfile.flush()
        except OSError:
            with LOCK:
                record["dropped"] = time.time()

    def _trickle_stream(self, record: dict[str, Any]) -> None:
        """A stream that never ends: a piece of text twice a second until the client drops it."""
        self._start_events()
        try:
            self._event(record, json.dumps(chunk({"role": "assistant", "content": ""})))
            while True:
                time.sleep(0.5)
                self._event(record, json.dumps(chunk({"content": "still thinking. "})))
        except OSError:
            with LOCK:
                record["dropped"] = time.time()

    def _trickle(self) -> None:
        """Headers at once, then a byte a second, never the end: only a deadline or a cancel stops it."""
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", "1000000")
        self.end_headers()
        try:
            self.wfile.write(b'{"id": "cmpl-trickle", ')
            while True:
                self.wfile.flush()
                time.sleep(1)
                self.wfile.write(b" ")
        except OSError:
            return


@contextmanager
def running(*mode: str) -> Iterator[str]:
    """The server as its own process (mode: nothing, or `walk`); yields its base URL, stops it after."""
    port = free_port()
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen([sys.executable, "-m", "tests.support.fake_openai", str(port), *mode], cwd=root)
    try:
        wait_until(lambda: port_open(port), timeout=20, what="fake openai", alive=lambda: proc.poll() is None)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(10)


def model_env(url: str, model: str, **settings: str) -> dict[str, str]:
    """A stack's environment whose runs the server at `url` drives, as `model`, with quick retries and
    `settings` (`stream="true"` sets DOSSIER_OPENAI_STREAM)."""
    env = {
        "DOSSIER_MODEL": "openai",
        "DOSSIER_OPENAI_BASE_URL": f"{url}/v1",
        "DOSSIER_OPENAI_MODEL": model,
        "DOSSIER_OPENAI_BACKOFF_SECONDS": "0.2",
    }
    return env | {f"DOSSIER_OPENAI_{name.upper()}": value for name, value in settings.items()}


# A stack's environment for killing its runner between a model's answer and its tool: each step waits
# there, and the killed runner's lease is soon over.
PACED = {"DOSSIER_RUN_LEASE_SECONDS": "3", "DOSSIER_RUN_STEP_DELAY_SECONDS": "1.5"}


def requests_of(url: str, question: str) -> list[dict[str, Any]]:
    """Every request the server at `url` got for the run asking `question`, in order."""
    return [r for r in httpx.get(f"{url}/requests").json() if r["task"] and question in r["task"]]


def seeded_workspace(api: Api) -> str:
    """A new workspace with one publication in its catalog."""
    ws = api.workspace()
    api.publish("Fund X liquidity report", "Fund X liquidity is adequate.", ws["id"])
    api.wait_catalog(ws["id"], 1)
    return str(ws["id"])


SOURCES = {"fundx-0", "fundx-1", "fundx-2"}


def sourced_workspace(api: Api) -> str:
    """A new workspace with three sources on Fund X (`SOURCES`) in its catalog."""
    ws = api.workspace()
    for n in range(len(SOURCES)):
        text = f"Source {n} on Fund X: liquidity covers {30 + n} days of redemptions."
        api.upload(pdf([text]), f"fundx-{n}", f"fundx-{n}.pdf", ws["id"])
    api.wait_catalog(ws["id"], 3, timeout=60)
    return str(ws["id"])


GATED_PAGES, GATED_MEMOS = 25, 8


def gated_workspace(api: Api) -> tuple[str, list[str]]:
    """A new workspace where `SEARCHED` matches every page of a minutes PDF (`GATED_PAGES`) and every one of
    `GATED_MEMOS` publications; the workspace and the publications' ids."""
    ws = api.workspace()
    pages = [f"Page {i}. The board discusses redemption gates, note number {i}." for i in range(GATED_PAGES)]
    assert api.upload(pdf(pages), "minutes", "minutes.pdf", ws["id"])["status"] == "active"
    memos = [
        api.publish(f"Memo {i} on gates", f"Memo {i}: the redemption gates of Fund X, seen again.", ws["id"])["id"]
        for i in range(GATED_MEMOS)
    ]
    api.wait_catalog(ws["id"], 1 + GATED_MEMOS)
    return str(ws["id"]), memos


def read_and_cited_the_sources(api: Api, run: dict[str, Any]) -> None:
    """Checks that a `catalog` run in a `sourced_workspace` read each source once and published citing each."""
    assert run["status"] == "completed", run["error"]
    read = [r for r in api.ledger(run["id"]) if r["stage"] == "read"]
    assert {r["ref"]["id"] for r in read} == SOURCES and len(read) == len(SOURCES)
    published = api.read(run["publication"])
    assert {s["id"] for s in published["sources"]} == SOURCES
    assert all(f"{s}@v1" in published["body"] for s in SOURCES)


def scenario_run(api: Api, workspace_id: str, name: str, timeout: float = 120) -> tuple[dict[str, Any], str]:
    """A run of the scenario `name` (with a question of its own) as it ended, and its question."""
    question = f"scenario:{name} {uuid.uuid4().hex[:8]}"
    run = api.wait_run(api.start_run(workspace_id, question, model="openai")["id"], timeout=timeout)
    return run, question


def completed_scenario(
    stack: RunningStack, url: str, name: str, timeout: float = 120
) -> tuple[Api, dict[str, Any], list[dict[str, Any]]]:
    """A run of the scenario `name` in a seeded workspace, checked to have completed, and the requests the
    model server at `url` got for it."""
    api = Api(stack)
    run, question = scenario_run(api, seeded_workspace(api), name, timeout=timeout)
    assert run["status"] == "completed", run["error"]
    return api, run, requests_of(url, question)


def killed_amid_a_batch(api: Api, stack: RunningStack, url: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A `batch` run asked through `api` on a paced `stack`, whose runner is SIGKILLed once the second of the
    answer's three calls ran (its note exists), while the third waits out its step delay. Checks that the
    resumed run ran the rest of the answer without asking the model again, and replayed the journaled answer
    once; returns the run as it ended and its ledger."""
    question = f"scenario:batch {uuid.uuid4().hex[:8]}"
    run = api.start_run(seeded_workspace(api), question, model="openai")
    probe(lambda: "notes/first.md" in api.files(run["id"]), timeout=60, interval=0.02)
    stack.kill("runhost")
    run = api.wait_run(run["id"], timeout=120)
    assert run["status"] == "completed", run["error"]

    sent = requests_of(url, question)
    assert len(sent) == 2 == run["stats"]["model_requests"], "the rest of the answer ran without a new request"
    answered = [m["tool_call_id"] for m in sent[1]["body"]["messages"] if m["role"] == "tool"]
    assert answered == ["batch-0", "batch-1", "batch-2"]
    assert run["stats"]["steps"] == 4
    ledger = api.ledger(run["id"])
    replayed = [r for r in ledger if r["stage"] == "replayed"]
    assert len(replayed) == 1 and replayed[0]["model_request"] == f"{run['id']}:r1"
    return run, ledger


def main() -> None:
    if len(sys.argv) > 2:
        MODE[0] = sys.argv[2]
    server = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler)
    server.serve_forever()


if __name__ == "__main__":
    main()
