"""Replays a given list of steps (for tests). `{plan}` in a string argument becomes the recited plan."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from services.runhost.policies.vocabulary import ModelInput, ToolCall


def _fill(value: Any, plan: str) -> Any:
    if isinstance(value, str):
        return value.replace("{plan}", plan)
    if isinstance(value, dict):
        return {k: _fill(v, plan) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, plan) for v in value]
    return value


class ScriptedPolicy:
    def __init__(self, steps: list[dict[str, Any]]):
        self.steps = steps

    @classmethod
    def from_file(cls, path: Path) -> ScriptedPolicy:
        steps = json.loads(path.read_text())
        if not isinstance(steps, list) or not all(isinstance(s, dict) and "name" in s for s in steps):
            raise ValueError(f"{path.name} is not a list of steps")
        return cls(steps)

    async def next_step(self, model_input: ModelInput) -> ToolCall:
        index = len(model_input.view.results)
        if index >= len(self.steps):
            return ToolCall("finish", {"answer": "The scripted steps are exhausted."}, call_id=f"s{index}")
        step = self.steps[index]
        return ToolCall(step["name"], _fill(step.get("arguments", {}), model_input.view.plan), call_id=f"s{index}")
