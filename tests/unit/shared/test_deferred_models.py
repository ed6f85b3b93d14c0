"""A process builds the validators of the contracts and settings it uses, when it first uses them
(shared/contracts/common.py `Model`, shared/settings.py): importing them builds none."""

from __future__ import annotations

import json
import subprocess
import sys

PROBE = """
import json
import shared.contracts.gateway, shared.contracts.mcp, shared.contracts.registry
from shared.contracts.common import Actor, Model
from shared.settings import CommonSettings, WorkspaceSettings

def every(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from every(sub)

models = [Model, *every(Model), CommonSettings, *every(CommonSettings)]
imported = [cls.__qualname__ for cls in models if cls.__pydantic_complete__]
Actor(scope="acme", principal="ana")
WorkspaceSettings()
used = sorted(cls.__qualname__ for cls in models if cls.__pydantic_complete__)
print(json.dumps({"models": len(models), "built_at_import": imported, "built_when_used": used}))
"""


def test_importing_the_contracts_builds_no_validator_and_using_one_builds_it() -> None:
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, check=True, text=True)
    seen = json.loads(out.stdout)
    assert seen["models"] > 100
    assert seen["built_at_import"] == []
    assert seen["built_when_used"] == ["Actor", "WorkspaceSettings"]
