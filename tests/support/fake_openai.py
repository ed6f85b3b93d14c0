"""A fake OpenAI-compatible `/v1/chat/completions` server, run as its own process in tests.

It speaks the wire format (tool_calls, `stream: false`) and plays a fixed script: a 429 first, then a
valid tool call, then a malformed one (arguments that are not JSON), then — only if the model input
carries the tool error back — a final answer through `finish`. Every request body is kept for assertions
at `GET /requests`.

Started with the mode `walk` (`python -m tests.support.fake_openai PORT walk`) it plays a longer script
instead, as a function of the input alone (like a model at temperature zero): the next step is chosen by
how many tool results the request carries, so a resumed run that sends an input again gets the same step.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from shared.procs import free_port, port_open, wait_until

REQUESTS: list[dict[str, Any]] = []
LOCK = threading.Lock()


def tool_call(name: str, arguments: str, call_id: str) -> dict[str, Any]:
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}],
    }
    return {
        "id": f"cmpl-{call_id}",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
    }


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
    done = sum(1 for m in body["messages"] if m.get("role") == "tool")
    if done < len(WALK):
        name, arguments = WALK[done]
        return 200, tool_call(name, json.dumps(arguments), f"walk-{done}")
    return 200, tool_call("finish", json.dumps({"answer": WALK_ANSWER}), f"walk-{done}")


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass

    def _send(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

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
        with LOCK:
            REQUESTS.append({"auth": self.headers.get("authorization"), "body": body})
            n = len(REQUESTS)
        status, payload = walk_answer(body) if MODE[0] == "walk" else answer_for(n, body)
        self._send(status, payload, {"retry-after": "0.2"} if status == 429 else None)


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


def main() -> None:
    if len(sys.argv) > 2:
        MODE[0] = sys.argv[2]
    server = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler)
    server.serve_forever()


if __name__ == "__main__":
    main()
