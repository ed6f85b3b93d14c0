"""The client's models (clients/python/dossier_client/models.py) are the API's own shapes: each field is in
the server's OpenAPI document with the same required-ness, and every field the document requires is there.
The client keeps its own copy because it is installed without the server's packages."""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from typing import Any

import pytest
from dossier_client import _routes
from dossier_client import models as m
from pydantic import BaseModel

from services.gateway.app import create_app
from shared.settings import GatewaySettings

CLIENT = Path(__file__).resolve().parents[3] / "clients" / "python" / "dossier_client"

# client model → the OpenAPI schema of the same JSON
MIRRORS: dict[type[BaseModel], str] = {
    m.Ref: "Ref",
    m.PublicationRef: "PublicationRef",
    m.HistoryRef: "HistoryRef",
    m.Lease: "Lease",
    m.LeaseState: "LeaseState",
    m.RunStats: "RunStats",
    m.CatalogItem: "CatalogItem",
    m.Catalog: "Catalog",
    m.CheckpointProposalResult: "CheckpointProposalResult",
    m.Run: "Run",
    m.Hit: "RunSearchHit",
    m.Passage: "ExternalRead",
    m.FileEntry: "FileEntry",
    m.ResumeRead: "ResumeRead",
    m.Resume: "Resume",
    m.TakeOver: "TakeReply",
    m.LedgerRow: "LedgerRow",
    m.Goal: "Goal",
    m.Workspace: "Workspace",
    m.PublicationVersion: "PublicationVersion",
    m.Extraction: "Extraction",
    m.AssetVersion: "AssetVersion",
    m.EvidenceHit: "SearchHit",
    m.Evidence: "Evidence",
    m.CheckpointUpdate: "CheckpointUpdate",
}


@pytest.fixture(scope="module")
def schemas() -> dict[str, Any]:
    return dict(create_app(GatewaySettings()).openapi()["components"]["schemas"])


@pytest.mark.parametrize("model", list(MIRRORS), ids=lambda model: model.__name__)
def test_a_client_model_mirrors_the_servers_schema(model: type[BaseModel], schemas: dict[str, Any]) -> None:
    schema = schemas[MIRRORS[model]]
    server, required = set(schema["properties"]), set(schema.get("required", []))
    client = set(model.model_fields)
    assert client <= server, f"{model.__name__} has fields the server does not send: {client - server}"
    assert required <= client, f"{model.__name__} lacks fields the server always sends: {required - client}"
    # A field the client requires is one the server always sends.
    assert {name for name, f in model.model_fields.items() if f.is_required()} <= required


def test_every_run_model_is_mirrored() -> None:
    mirrored = set(MIRRORS)
    models = {v for v in vars(m).values() if isinstance(v, type) and issubclass(v, m.Model) and v is not m.Model}
    assert models == mirrored


@pytest.mark.parametrize(
    ("target", "body"),
    [
        ("ev_0123_4", {"ref": {"kind": "evidence", "id": "ev_0123_4"}}),
        ("pub_abc@v2", {"ref": {"kind": "publication", "id": "pub_abc", "version": 2}}),
        (
            "announcement@v1 page:3",
            {"ref": {"kind": "source", "id": "announcement", "version": 1}, "locator": "page:3"},
        ),
        (
            m.Ref(kind="publication", id="pub_x", version=1),
            {"ref": {"kind": "publication", "id": "pub_x", "version": 1}},
        ),
        (
            m.Hit(evidence_id=None, ref=m.Ref(kind="publication", id="pub_x", version=3), locator=None, snippet="s"),
            {"ref": {"kind": "publication", "id": "pub_x", "version": 3}},
        ),
        (
            m.Hit(evidence_id="ev_1", ref=m.Ref(kind="source", id="a", version=1), locator="page:1", snippet="s"),
            {"ref": {"kind": "evidence", "id": "ev_1"}},
        ),
    ],
)
def test_what_a_read_names(target: Any, body: dict[str, Any]) -> None:
    assert m.ref_to_read(target) == body


def test_a_passage_cites_as_the_answers_do() -> None:
    source = m.Passage(
        ref=m.Ref(kind="source", id="announcement", version=1), locator="page:1", content_hash=None, text="t", path="p"
    )
    publication = m.Passage(
        ref=m.Ref(kind="publication", id="pub_x", version=2), locator=None, content_hash=None, text="t", path="p"
    )
    assert (source.cite(), publication.cite()) == ("announcement@v1 page:1", "pub_x@v2")


def test_the_client_imports_nothing_of_the_server() -> None:
    """Installed alone (httpx and pydantic; langchain-core and openai-agents as extras), it must not reach
    for the server's packages, nor for mcp."""
    allowed = set(sys.stdlib_module_names) | {"httpx", "pydantic", "dossier_client", "langchain_core", "agents"}
    for path in CLIENT.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            for name in names:
                assert name.split(".")[0] in allowed, f"{path.name} imports {name}"


def test_a_passage_read_by_evidence_id_is_read_again_by_it() -> None:
    """The run's read route takes a passage by its evidence id: a passage keeps the id it was read by."""
    answer = {
        "ref": {"kind": "source", "id": "announcement", "version": 1},
        "locator": "page:1",
        "content_hash": "c",
        "text": "t",
        "path": "sources/x.txt",
    }
    call = _routes.run_read("run_1", "tok", {"ref": {"kind": "evidence", "id": "ev_1"}})
    passage = call.parse(answer)
    assert passage.evidence_id == "ev_1"
    assert m.ref_to_read(passage) == {"ref": {"kind": "evidence", "id": "ev_1"}}
    assert passage.cite() == "announcement@v1 page:1"
