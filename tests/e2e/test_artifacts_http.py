"""Artifacts through the gateway's HTTP API on the whole local stack."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterator

import httpx
import pytest

from tests.support.api import error_of, gateway_client, scoped_client
from tests.support.stack import RunningStack

REPORT = b"<!doctype html><html><head><title>A</title></head><body><script>alert(1)</script>A</body></html>"


@pytest.fixture
def api(stack: RunningStack) -> Iterator[httpx.Client]:
    with scoped_client(stack) as client:
        yield client


def upload(
    api: httpx.Client, data: bytes = REPORT, ctype: str = "text/html", title: str | None = "Report A"
) -> httpx.Response:
    fields = {"title": title} if title is not None else {}
    return api.post("/v1/artifacts", files={"file": ("report.html", data, ctype)}, data=fields)


def test_upload_get_and_sandboxed_content(api: httpx.Client) -> None:
    r = upload(api)
    assert r.status_code == 201
    art = r.json()
    assert {"id", "title", "media_type", "size", "content_hash", "created_at"} <= set(art)
    assert art["media_type"] == "text/html" and art["size"] == len(REPORT)
    assert art["content_hash"] == hashlib.sha256(REPORT).hexdigest() and art["title"] == "Report A"
    assert api.get(f"/v1/artifacts/{art['id']}").json() == art

    r = api.get(f"/v1/artifacts/{art['id']}/content")
    assert r.status_code == 200 and r.content == REPORT
    assert r.headers["content-security-policy"] == "sandbox"
    assert r.headers["x-content-type-options"] == "nosniff"
    assert r.headers["content-type"] == "text/html"


def test_large_file_streams_whole(api: httpx.Client) -> None:
    data = b"<!doctype html><pre>" + bytes(range(32, 127)) * 25_000 + b"</pre>"  # ~2.3 MB, several chunks
    art = upload(api, data).json()
    r = api.get(f"/v1/artifacts/{art['id']}/content")
    assert r.status_code == 200 and int(r.headers["content-length"]) == len(data)
    assert hashlib.sha256(r.content).hexdigest() == art["content_hash"]


@pytest.mark.parametrize(
    ("data", "ctype"),
    [
        (b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n", "text/html"),  # declared HTML, bytes are a PDF
        (REPORT, "application/pdf"),  # HTML bytes, declared as something else
        (b"just some words", "text/plain"),
    ],
)
def test_non_html_is_unsupported(api: httpx.Client, data: bytes, ctype: str) -> None:
    r = upload(api, data, ctype)
    assert r.status_code == 415 and error_of(r)["code"] == "unsupported"


def test_malformed_uploads_are_invalid(api: httpx.Client) -> None:
    r = upload(api, title=None)
    assert r.status_code == 422 and error_of(r)["details"]["field"] == "title"
    r = upload(api, b"")
    assert r.status_code == 422 and error_of(r)["details"]["field"] == "file"
    r = api.post("/v1/artifacts", json={"title": "x"})
    assert r.status_code == 422


def test_other_scope_gets_404(stack: RunningStack, api: httpx.Client) -> None:
    art = upload(api).json()
    other = {"Authorization": f"Bearer {stack.token(f's{uuid.uuid4().hex[:8]}')}"}
    with gateway_client(base_url=stack.url, headers=other, timeout=30) as stranger:
        responses = [stranger.get(f"/v1/artifacts/{art['id']}"), stranger.get(f"/v1/artifacts/{art['id']}/content")]
    missing = api.get("/v1/artifacts/art_missing")
    assert [r.status_code for r in responses] == [404, 404]
    assert all(error_of(r)["message"] == error_of(missing)["message"] for r in responses)
