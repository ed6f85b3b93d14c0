"""The import graph of the code: no cycle (counting imports made only for type checking, or deferred into a
function), and every arrow points down: a service imports only itself and `shared`; `shared` imports no
service and no dev tooling; nothing a service imports lives in `devstack`."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("shared", "services", "devstack", "dossier_cli")


def _modules() -> dict[str, Path]:
    modules = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
            modules[name] = path
    return modules


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
            elif isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                continue
            graph[name] |= {t for t in targets if t in modules and t != name}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components with more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycle() -> None:
    assert _cycles(_graph()) == []


def test_every_import_points_down() -> None:
    upward = []
    for name, targets in _graph().items():
        for target in targets:
            top, owner = name.split(".")[0], name.split(".")[:2]
            shared = target.split(".")[0] == "shared"
            if top == "shared" and not shared:
                upward.append((name, target))
            elif top == "services" and not (shared or target.split(".")[:2] == owner):
                upward.append((name, target))
    assert upward == []


def test_the_cycle_finder_finds_one() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def _pool_acquires(source: str) -> list[int]:
    """Lines where the code takes a session straight from a pool (`<anything>.pool.acquire()`)."""
    return [
        node.lineno
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "acquire"
        and isinstance(node.func.value, ast.Attribute)
        and node.func.value.attr == "pool"
    ]


def test_a_service_takes_its_sessions_only_through_database() -> None:
    """`Database.statement()` and `.transaction()` say a session that closed under its block as lost
    (asyncpg can say it only as "another operation is in progress"): the request is answered as one whose
    outcome is not known, and a run is taken up again, never failed as an internal error."""
    raw = [
        f"{path.relative_to(ROOT)}:{line}"
        for name, path in _modules().items()
        if name.split(".")[0] in ("services", "shared") and name != "shared.db"
        for line in _pool_acquires(path.read_text())
    ]
    assert raw == []


def test_the_pool_acquire_finder_finds_one() -> None:
    assert _pool_acquires("async def f(db):\n    async with db.pool.acquire() as c:\n        pass\n") == [2]
