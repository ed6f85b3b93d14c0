"""Every route the client calls, as a request and the way to read its answer; `Dossier` and `AsyncDossier`
send the same calls, one blocking and one async."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar
from urllib.parse import quote

from pydantic import BaseModel

from dossier_client import models as m
from dossier_client._transport import Request

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)

LEASE_HEADER = "X-Run-Lease"
HistoryItem = m.HistoryRef | m.PublicationRef | m.PublicationVersion | dict[str, Any] | tuple[str, int]


@dataclass
class Call(Generic[T]):
    request: Request
    parse: Callable[[Any], T]


def seg(value: str | int) -> str:
    """One path segment: an id never adds a segment or a query to the URL."""
    return quote(str(value), safe="")


def file_path(path: str) -> str:
    return "/".join(quote(part, safe="") for part in path.split("/"))


def as_model(model: type[M]) -> Callable[[Any], M]:
    return model.model_validate


def as_items(model: type[M]) -> Callable[[Any], list[M]]:
    return lambda body: [model.model_validate(item) for item in body["items"]]


def page_of(model: type[M]) -> Callable[[Any], tuple[list[M], str | None]]:
    return lambda body: ([model.model_validate(item) for item in body["items"]], body.get("next_cursor"))


def history_body(history: Sequence[HistoryItem] | None) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for item in history or ():
        if isinstance(item, tuple):
            out.append({"publication_id": item[0], "version": item[1]})
        elif isinstance(item, m.HistoryRef):
            out.append({"publication_id": item.publication_id, "version": item.version})
        elif isinstance(item, m.PublicationRef | m.PublicationVersion):
            out.append({"publication_id": item.id, "version": item.version})
        else:
            out.append(dict(item))
    return out


def upload_file(file: str | Path | bytes, filename: str | None) -> tuple[str, bytes]:
    if isinstance(file, bytes):
        return filename or "upload", file
    path = Path(file)
    return filename or path.name, path.read_bytes()


def request_id(value: str | None) -> str:
    return value or uuid.uuid4().hex


# -- the API ---------------------------------------------------------------------------------------------


def health() -> Call[dict[str, Any]]:
    return Call(Request("GET", "/v1/health"), dict)


def create_workspace(title: str, goal: str) -> Call[m.Workspace]:
    return Call(Request("POST", "/v1/workspaces", json={"title": title, "goal": goal}), as_model(m.Workspace))


def workspace(workspace_id: str) -> Call[m.Workspace]:
    return Call(Request("GET", f"/v1/workspaces/{seg(workspace_id)}"), as_model(m.Workspace))


def workspaces(cursor: str | None) -> Call[tuple[list[m.Workspace], str | None]]:
    return Call(Request("GET", "/v1/workspaces", params={"cursor": cursor}), page_of(m.Workspace))


def catalog(workspace_id: str, limit: int | None) -> Call[m.Catalog]:
    request = Request("GET", f"/v1/workspaces/{seg(workspace_id)}/catalog", params={"limit": limit})
    return Call(request, as_model(m.Catalog))


def publish(title: str, body: str, workspace_id: str | None) -> Call[m.PublicationVersion]:
    payload = {"title": title, "body": body} | ({"workspace_id": workspace_id} if workspace_id else {})
    return Call(Request("POST", "/v1/publications", json=payload), as_model(m.PublicationVersion))


def publication_version(pub_id: str, version: int) -> Call[m.PublicationVersion]:
    path = f"/v1/publications/{seg(pub_id)}/versions/{seg(version)}"
    return Call(Request("GET", path), as_model(m.PublicationVersion))


def upload(
    file: str | Path | bytes, source_id: str, workspace_id: str | None, filename: str | None
) -> Call[m.AssetVersion]:
    fields = {"source_id": source_id} | ({"workspace_id": workspace_id} if workspace_id else {})
    request = Request("POST", "/v1/assets", data=fields, files={"file": upload_file(file, filename)})
    return Call(request, as_model(m.AssetVersion))


def search_evidence(q: str, source_id: str | None, limit: int | None) -> Call[list[m.EvidenceHit]]:
    params = {"q": q, "source_id": source_id, "limit": limit}
    return Call(Request("GET", "/v1/evidence/search", params=params), as_items(m.EvidenceHit))


def evidence(evidence_id: str) -> Call[m.Evidence]:
    return Call(Request("GET", f"/v1/evidence/{seg(evidence_id)}"), as_model(m.Evidence))


def start_run(workspace_id: str, question: str, **fields: Any) -> Call[m.Run]:
    body: dict[str, Any] = {"question": question, "request_id": request_id(fields.pop("request_id", None))}
    body["history"] = history_body(fields.pop("history", None))
    body |= {k: v for k, v in fields.items() if v is not None}
    return Call(Request("POST", f"/v1/workspaces/{seg(workspace_id)}/runs", json=body), as_model(m.Run))


def run(run_id: str) -> Call[m.Run]:
    return Call(Request("GET", f"/v1/runs/{seg(run_id)}"), as_model(m.Run))


def cancel_run(run_id: str) -> Call[m.Run]:
    return Call(Request("POST", f"/v1/runs/{seg(run_id)}/cancel"), as_model(m.Run))


def ledger(run_id: str, cursor: str | None) -> Call[tuple[list[m.LedgerRow], str | None]]:
    request = Request("GET", f"/v1/runs/{seg(run_id)}/ledger", params={"cursor": cursor})
    return Call(request, page_of(m.LedgerRow))


def run_files(run_id: str, cursor: str | None) -> Call[tuple[list[m.FileEntry], str | None]]:
    request = Request("GET", f"/v1/runs/{seg(run_id)}/files", params={"cursor": cursor})
    return Call(request, page_of(m.FileEntry))


def run_file(run_id: str, path: str) -> Call[str]:
    return Call(Request("GET", f"/v1/runs/{seg(run_id)}/files/{file_path(path)}"), str)


def prov(run_id: str) -> Call[dict[str, Any]]:
    return Call(Request("GET", f"/v1/runs/{seg(run_id)}/prov"), dict)


def take(run_id: str, force: bool) -> Call[m.TakeOver]:
    request = Request("POST", f"/v1/runs/{seg(run_id)}/lease/take", json={"force": force})
    return Call(request, as_model(m.TakeOver))


# -- run-bound calls of an external run (under its lease) ------------------------------------------------


def bound(run_id: str, token: str, method: str, route: str, **sent: Any) -> Request:
    headers = {LEASE_HEADER: token} | sent.pop("headers", {})
    return Request(method, f"/v1/runs/{seg(run_id)}{route}", headers=headers, **sent)


def run_catalog(run_id: str, token: str) -> Call[m.Catalog]:
    return Call(bound(run_id, token, "GET", "/catalog"), as_model(m.Catalog))


def run_search(run_id: str, token: str, q: str, limit: int) -> Call[list[m.Hit]]:
    return Call(bound(run_id, token, "GET", "/search", params={"q": q, "limit": limit}), as_items(m.Hit))


def run_read(run_id: str, token: str, body: dict[str, Any]) -> Call[m.Passage]:
    """The read; a passage read by its evidence id keeps that id, so reading the passage again names it."""
    evidence_id = body["ref"]["id"] if body.get("ref", {}).get("kind") == "evidence" else None

    def passage(response: Any) -> m.Passage:
        read = as_model(m.Passage)(response)
        read._evidence_id = evidence_id
        return read

    return Call(bound(run_id, token, "POST", "/read", json=body), passage)


def run_write(run_id: str, token: str, path: str, text: str) -> Call[None]:
    request = bound(run_id, token, "PUT", f"/files/{file_path(path)}", content=text.encode(), headers=_TEXT_PLAIN)
    return Call(request, lambda _: None)


def renew(run_id: str, token: str) -> Call[m.Lease]:
    return Call(bound(run_id, token, "POST", "/lease"), as_model(m.Lease))


def finish(
    run_id: str, token: str, answer: str, title: str | None, checkpoint: m.CheckpointUpdate | dict[str, Any] | None
) -> Call[m.Run]:
    body: dict[str, Any] = {"answer": answer}
    if title is not None:
        body["title"] = title
    if checkpoint is not None:
        body["checkpoint"] = (
            checkpoint.model_dump(exclude_none=True) if isinstance(checkpoint, m.CheckpointUpdate) else checkpoint
        )
    return Call(bound(run_id, token, "POST", "/finish", json=body), as_model(m.Run))


_TEXT_PLAIN = {"Content-Type": "text/plain; charset=utf-8"}
