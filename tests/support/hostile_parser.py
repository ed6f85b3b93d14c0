"""A hostile parser, for tests only: test code run through the production parser's own confinement.

`HostileSandbox` is the service's `Sandbox` (the same spare, the same job hand-over, the same
`services.assets.parser.serve`, hence the same `confinement.enter` and seccomp filter) whose child runs
a test's payload instead of the extractors. Nothing in the service can start it: the only way to run
code in a parser is to import this module from a test.

The payload is Python run in the confined child with `params` (the job's JSON), `input_path` (the job's
input) and `report(name, outcome)`; each report becomes a passage `(name, outcome)`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from services.assets.app import limits_of
from services.assets.confinement import Plan
from services.assets.sandbox import Sandbox
from shared.settings import AssetsSettings

_HARNESS = """
import json, sys
from services.assets import parser

def work(kind, input_path, limits, emit):
    def report(name, outcome):
        emit(["p", name, str(outcome), {}])
    exec(sys.argv[2], {"params": json.loads(kind), "input_path": input_path, "report": report})
    return ["done", {"status": "complete", "units_total": 0, "units_extracted": 0, "notes": []}]

code = parser.serve(json.loads(sys.argv[1]), work)
sys.stdout.flush()
import os
os._exit(code)
"""


class HostileSandbox(Sandbox):
    def __init__(self, payload: str, *, plan: Plan | None = None):
        super().__init__(limits_of(AssetsSettings()), cpu_seconds=30, memory_bytes=1536 * 2**20, wall_seconds=60)
        self.payload = payload
        if plan is not None:
            self._plan = plan

    def _command(self, config: str) -> list[str]:
        return [sys.executable, "-B", "-c", _HARNESS, config, self.payload]

    async def attack(self, input_path: Path, params: dict[str, Any]) -> dict[str, str]:
        """Run the payload on one job; what it reported, by name."""
        got: dict[str, str] = {}

        async def sink(name: str, outcome: str, meta: dict[str, Any]) -> None:
            got[name] = outcome

        await self.run(input_path, json.dumps(params), sink)
        return got
