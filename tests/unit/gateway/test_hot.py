"""Which requests the hot read takes: only the plain ones; everything else goes on to FastAPI."""

from __future__ import annotations

from typing import Any

import pytest

from services.gateway.routes.publications import HOT_READS

READ = HOT_READS[0]


def scope(
    path: str, *, method: str = "GET", query: bytes = b"", headers: list[tuple[bytes, bytes]] | None = None
) -> dict[str, Any]:
    return {"type": "http", "method": method, "path": path, "query_string": query, "headers": headers or []}


def test_the_hot_route_is_the_routers_own() -> None:
    assert READ.route.path == "/v1/publications/{pub_id}/versions/{version}"
    assert READ.route.name == "read_publication_version"


@pytest.mark.parametrize(
    ("path", "params"),
    [
        ("/v1/publications/pub_1/versions/1", {"pub_id": "pub_1", "version": 1}),
        ("/v1/publications/pub_1/versions/007", {"pub_id": "pub_1", "version": 7}),
        ("/v1/publications/pub 1/versions/999999999", {"pub_id": "pub 1", "version": 999999999}),
        ("/v1/publications/é/versions/2", {"pub_id": "é", "version": 2}),
    ],
)
def test_plain_reads_are_taken_with_typed_params(path: str, params: dict[str, Any]) -> None:
    assert READ.match(scope(path)) == params


@pytest.mark.parametrize(
    "request_scope",
    [
        scope("/v1/publications/pub_1/versions/1", method="HEAD"),
        scope("/v1/publications/pub_1/versions/1", method="POST"),
        scope("/v1/publications/pub_1/versions/1", query=b"x=1"),
        scope("/v1/publications/pub_1/versions/1", headers=[(b"content-length", b"2")]),
        scope("/v1/publications/pub_1/versions/1", headers=[(b"transfer-encoding", b"chunked")]),
        scope("/v1/publications/pub_1/versions/abc"),
        scope("/v1/publications/pub_1/versions/1.0"),
        scope("/v1/publications/pub_1/versions/-1"),
        # The route's own validation words these (a version from 1, an id of at most 200 characters).
        scope("/v1/publications/pub_1/versions/0"),
        scope("/v1/publications/pub_1/versions/000"),
        scope(f"/v1/publications/{'p' * 201}/versions/1"),
        scope("/v1/publications/pub_1/versions/1234567890"),
        scope("/v1/publications/pub\x00/versions/1"),
        scope("/v1/publications/pub\ud800/versions/1"),
        scope("/v1/publications/pub_1/versions/1/claims"),
        scope("/v1/publications/pub_1/versions/"),
        scope("/v1/publications/pub_1"),
    ],
)
def test_anything_else_goes_on_to_fastapi(request_scope: dict[str, Any]) -> None:
    assert READ.match(request_scope) is None


def test_an_empty_declared_body_is_still_plain() -> None:
    assert READ.match(scope("/v1/publications/p/versions/1", headers=[(b"content-length", b"0")])) is not None
