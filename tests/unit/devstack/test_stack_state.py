"""stack.json is the stack's announcement: whoever reads a port there finds Prometheus's targets file agreeing."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from devstack import stack as stack_module
from devstack.scrape import TARGETS_FILE, write_targets
from devstack.stack import Stack


def test_the_targets_file_is_written_before_stack_json_names_a_moved_port(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    umask = os.umask(0o022)
    try:
        stack = Stack({"DOSSIER_HOME": str(tmp_path / "home")})
    finally:
        os.umask(umask)
    stack.choose_ports()
    stack.write_state()
    home = stack.home
    process = next(iter(stack.metrics_ports))
    stack.metrics_ports[process] += 1  # a process restarted on another port

    seen: list[tuple[str, str]] = []

    def targets_then_look(at: Path, urls: dict[str, str]) -> None:
        write_targets(at, urls)
        # What a reader of both files sees once the targets file is replaced: stack.json no newer than it.
        state = json.loads((home / "stack.json").read_text())["metrics"][process]
        groups = json.loads((home / TARGETS_FILE).read_text())
        target = next(g for g in groups if g["labels"]["process"] == process)["targets"][0]
        seen.append((state, f"http://{target}/metrics"))

    monkeypatch.setattr(stack_module, "write_targets", targets_then_look)
    stack.write_state()
    moved = f"http://127.0.0.1:{stack.metrics_ports[process]}/metrics"
    assert seen and seen[0][1] == moved
    assert seen[0][0] != moved, "stack.json named the new port before the targets file did"
    assert json.loads((home / "stack.json").read_text())["metrics"][process] == moved
