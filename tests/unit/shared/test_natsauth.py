"""The bus permissions as written: the deployment file matches the code, and each caller list is complete."""

from __future__ import annotations

import ast
from pathlib import Path

from services.workspace.app import create_app
from shared.natsauth import CALLS, deployment_authorization, service_permissions, workspace_durables
from shared.settings import WorkspaceSettings

ROOT = Path(__file__).resolve().parents[3]


def test_the_deployment_file_is_the_generated_one() -> None:
    assert (ROOT / "deploy" / "nats" / "auth.conf").read_text() == deployment_authorization()


def test_the_workspace_durables_are_the_ones_it_creates() -> None:
    runtime = create_app(WorkspaceSettings(database_url="postgresql://nobody@localhost/none"))
    assert {runtime.durable(e): e.subject for e in runtime.event_rules} == workspace_durables()


def test_no_service_may_administer_the_stream() -> None:
    for service in CALLS:
        allowed = service_permissions(service)["publish"]["allow"]
        assert not [s for s in allowed if ".DELETE." in s or ".PURGE." in s or ".UPDATE." in s or s in (">", "$JS.>")]


def _called_constants(folder: Path) -> set[str]:
    """`<module>.<CONSTANT>` (or a bare constant) passed as the first argument of `.call(...)` or `.call_json(...)`."""
    found: set[str] = set()
    for path in folder.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("call", "call_json")
            ):
                first = node.args[0] if node.args else None
                if isinstance(first, ast.Attribute):
                    found.add(first.attr)
                elif isinstance(first, ast.Name):
                    found.add(first.id)
    return found


def test_every_subject_a_service_calls_is_granted() -> None:
    """A call missing from CALLS would be refused by the server at run time; catch it here."""
    import shared.contracts.artifact as artifact
    import shared.contracts.assets as assets
    import shared.contracts.publication as publication
    import shared.contracts.runhost as runhost
    import shared.contracts.workspace as workspace
    from services.runhost import owners as runhost_owners
    from services.workspace import owners as workspace_owners

    modules = [artifact, assets, publication, runhost, workspace, runhost_owners, workspace_owners]
    for service in ("gateway", "runhost", "workspace"):
        for name in _called_constants(ROOT / "services" / service):
            values = {getattr(m, name) for m in modules if isinstance(getattr(m, name, None), str)}
            values = {v for v in values if v.startswith("dossier.")}
            if values:
                assert values & set(CALLS[service]), (service, name)
