"""Every bus call the code makes goes through a typed subject: no raw call, no dict sent as a request."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
FOLDERS = ("services", "shared", "dossier_cli", "devstack")
TYPED = {"call", "call_json", "relay"}


def _calls() -> list[tuple[str, ast.Call]]:
    found = []
    for folder in FOLDERS:
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                    found.append((f"{path.relative_to(ROOT)}:{node.lineno}", node))
    return found


def test_no_code_outside_the_tests_sends_a_raw_request() -> None:
    """`BusClient.call_raw` is for tests that send what no contract would; the code asks through `call`."""
    raw = [where for where, node in _calls() if isinstance(node.func, ast.Attribute) and node.func.attr == "call_raw"]
    assert [where for where in raw if not where.startswith("shared/bus.py:")] == []


def test_no_request_is_a_dict_literal() -> None:
    literal = [
        where
        for where, node in _calls()
        if isinstance(node.func, ast.Attribute)
        and node.func.attr in TYPED
        and len(node.args) >= 2
        and isinstance(node.args[1], ast.Dict | ast.Call)
        and (isinstance(node.args[1], ast.Dict) or getattr(node.args[1].func, "id", None) == "dict")
    ]
    assert literal == []
