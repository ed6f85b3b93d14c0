"""Hostile input at the gateway (The API's error rules (docs/api.md)): unstorable text and oversized bodies, on the whole stack.

Text no database can store (U+0000, a lone surrogate) in any JSON field, query parameter, path id, multipart
field or file name answers 422 `invalid` naming the field. A JSON body over 1 MiB answers 413 before it is
parsed and before the token is checked, chunked or not.
"""

from __future__ import annotations

import gzip
import json
import socket
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.support.api import Api, error_of, gateway_client, probe
from tests.support.logs import lines_with
from tests.support.stack import RunningStack

BAD = "@UNSTORABLE@"
# As they travel in JSON: `\u0000` decodes to U+0000, a lone `\ud800` to a lone surrogate.
JSON_ESCAPES = {"nul": "a\\u0000b", "surrogate": "a\\ud800b"}
MiB = 1024 * 1024


@pytest.fixture(scope="module")
def api(stack: RunningStack) -> Iterator[Api]:
    client = Api(stack)
    yield client
    client.http.close()


@pytest.fixture(scope="module")
def ids(api: Api) -> dict[str, Any]:
    ws = api.workspace()
    pub = api.publish("Report A", "Fund X holds 30% in cash.", workspace_id=ws["id"])
    return {"ws": ws["id"], "pub": pub["id"]}


def send_json(http: httpx.Client, method: str, path: str, body: Any, bad: str) -> httpx.Response:
    """`body` with every BAD marker replaced by unstorable text, escaped as JSON carries it."""
    raw = json.dumps(body).replace(BAD, JSON_ESCAPES[bad])
    return http.request(method, path, content=raw.encode(), headers={"content-type": "application/json"})


def json_cases(ids: dict[str, Any]) -> list[tuple[str, str, dict[str, Any], str]]:
    ws, pub = ids["ws"], ids["pub"]
    run = {"question": "q", "request_id": uuid.uuid4().hex}
    return [
        ("POST", "/v1/workspaces", {"title": BAD, "goal": "g"}, "title"),
        ("POST", "/v1/workspaces", {"title": "t", "goal": BAD}, "goal"),
        ("PUT", f"/v1/workspaces/{ws}/goal", {"text": BAD, "expected_version": 1}, "text"),
        ("POST", f"/v1/workspaces/{ws}/sources", {"source_id": BAD}, "source_id"),
        ("POST", f"/v1/workspaces/{ws}/artifacts", {"artifact_id": BAD}, "artifact_id"),
        ("PUT", f"/v1/workspaces/{ws}/checkpoint", {"expected_revision": 0, "summary": BAD}, "summary"),
        (
            "PUT",
            f"/v1/workspaces/{ws}/checkpoint",
            {"expected_revision": 0, "add_questions": ["ok", BAD]},
            "add_questions.1",
        ),
        (
            "PUT",
            f"/v1/workspaces/{ws}/checkpoint",
            {"expected_revision": 0, "resolve_questions": [BAD]},
            "resolve_questions.0",
        ),
        ("POST", f"/v1/workspaces/{ws}/runs", {**run, "question": BAD}, "question"),
        ("POST", f"/v1/workspaces/{ws}/runs", {**run, "request_id": BAD}, "request_id"),
        ("POST", f"/v1/workspaces/{ws}/runs", {**run, "model": BAD}, "model"),
        ("POST", f"/v1/workspaces/{ws}/runs", {**run, "conversation_id": BAD}, "conversation_id"),
        (
            "POST",
            f"/v1/workspaces/{ws}/runs",
            {**run, "history": [{"publication_id": BAD, "version": 1}]},
            "history.0.publication_id",
        ),
        ("POST", "/v1/publications", {"title": BAD, "body": "b"}, "title"),
        ("POST", "/v1/publications", {"title": "t", "body": BAD}, "body"),
        ("POST", "/v1/publications", {"title": "t", "body": "b", "workspace_id": BAD}, "workspace_id"),
        ("POST", f"/v1/publications/{pub}/versions", {"body": BAD, "expected_latest_version": 1}, "body"),
        (
            "POST",
            f"/v1/publications/{pub}/versions",
            {"body": "b", "title": BAD, "expected_latest_version": 1},
            "title",
        ),
        ("POST", f"/v1/publications/{pub}/versions/1/withdraw", {"reason": BAD}, "reason"),
        ("POST", "/v1/assets/import", {"root": BAD, "path": "a.txt", "source_id": "S1"}, "root"),
        ("POST", "/v1/assets/import", {"root": "docs", "path": BAD, "source_id": "S1"}, "path"),
        ("POST", "/v1/assets/import", {"root": "docs", "path": "a.txt", "source_id": BAD}, "source_id"),
        (
            "POST",
            "/v1/assets/import",
            {"root": "docs", "path": "a.txt", "source_id": "S1", "workspace_id": BAD},
            "workspace_id",
        ),
        ("POST", "/v1/workspaces", {"title": "t", "goal": "g", BAD: "x"}, "body"),
    ]


@pytest.mark.parametrize("bad", sorted(JSON_ESCAPES))
def test_unstorable_json_fields_are_invalid(api: Api, ids: dict[str, Any], bad: str) -> None:
    for method, path, body, field in json_cases(ids):
        r = send_json(api.http, method, path, body, bad)
        assert r.status_code == 422, (method, path, field, r.status_code, r.text[:300])
        assert error_of(r)["code"] == "invalid" and error_of(r)["details"]["field"] == field, (path, r.text)


@pytest.mark.parametrize("blank", [" ", "   ", "\n\t ", "\u3000"])
def test_blank_questions_titles_and_goals_are_invalid(api: Api, ids: dict[str, Any], blank: str) -> None:
    ws, pub = ids["ws"], ids["pub"]
    cases = [
        ("POST", "/v1/workspaces", {"title": blank, "goal": "g"}, "title"),
        ("POST", "/v1/workspaces", {"title": "t", "goal": blank}, "goal"),
        ("PUT", f"/v1/workspaces/{ws}/goal", {"text": blank, "expected_version": 1}, "text"),
        ("POST", f"/v1/workspaces/{ws}/runs", {"question": blank, "request_id": uuid.uuid4().hex}, "question"),
        ("POST", "/v1/publications", {"title": blank, "body": "b"}, "title"),
        (
            "POST",
            f"/v1/publications/{pub}/versions",
            {"title": blank, "body": "b", "expected_latest_version": 1},
            "title",
        ),
    ]
    for method, path, body, field in cases:
        r = api.http.request(method, path, json=body)
        assert r.status_code == 422, (method, path, field, r.status_code, r.text[:300])
        assert error_of(r)["code"] == "invalid" and error_of(r)["details"]["field"] == field, (path, r.text)
        assert "blank" in error_of(r)["message"], r.text
    assert api.items(f"/v1/workspaces/{ws}/runs") == []


@pytest.mark.parametrize("bad", sorted(JSON_ESCAPES))
def test_unstorable_admin_fields_are_invalid(stack: RunningStack, bad: str) -> None:
    with gateway_client(base_url=stack.url, headers={"Authorization": f"Bearer {stack.admin_token}"}) as admin:
        r = send_json(admin, "POST", "/v1/admin/tokens", {"scope": "acme", "principal": BAD}, bad)
    assert r.status_code == 422 and error_of(r)["details"]["field"] == "principal", r.text


def operations(stack: RunningStack) -> Iterator[tuple[str, str, list[dict[str, Any]]]]:
    """Every operation the gateway documents: (method, path template, parameters)."""
    spec = httpx.get(f"{stack.url}/openapi.json").json()
    for template, item in spec["paths"].items():
        for method, op in item.items():
            yield method.upper(), template, op.get("parameters", [])


def test_unstorable_path_ids_and_query_parameters_are_invalid(stack: RunningStack, api: Api) -> None:
    admin = {"Authorization": f"Bearer {stack.admin_token}"}
    checked = 0
    for method, template, params in operations(stack):
        headers = admin if template.startswith("/v1/admin") else None
        path_names = [p["name"] for p in params if p["in"] == "path"]
        for name in path_names:
            path = template
            for other in path_names:
                path = path.replace("{" + other + "}", "%00" if other == name else "x1")
            r = api.http.request(method, path, headers=headers)
            assert r.status_code == 422, (method, template, name, r.status_code, r.text[:300])
            assert error_of(r)["details"]["field"] == name, (method, template, r.text)
            checked += 1
        base = template
        for other in path_names:
            base = base.replace("{" + other + "}", "x1")
        for name in [p["name"] for p in params if p["in"] == "query"]:
            r = api.http.request(method, base, params={name: "a\x00b"}, headers=headers)
            assert r.status_code == 422, (method, template, name, r.status_code, r.text[:300])
            assert error_of(r)["details"]["field"] == name, (method, template, r.text)
            checked += 1
    assert checked >= 30  # every path id and query parameter of the API, not a handful


def test_undecodable_path_bytes_are_not_a_fault(api: Api) -> None:
    # Percent-encoded bytes that are no UTF-8 (a surrogate's encoding) decode to U+FFFD: storable, so not found.
    r = api.http.get("/v1/workspaces/ws_%ED%A0%80")
    assert r.status_code == 404 and error_of(r)["code"] == "not_found"


def multipart(fields: dict[str, bytes], filename: bytes, data: bytes = b"%PDF-1.4 hello") -> tuple[bytes, str]:
    boundary = uuid.uuid4().hex
    parts = [
        b'--%s\r\nContent-Disposition: form-data; name="%s"\r\n\r\n%s\r\n' % (boundary.encode(), k.encode(), v)
        for k, v in fields.items()
    ]
    parts.append(
        b'--%s\r\nContent-Disposition: form-data; name="file"; filename="%s"\r\n'
        b"Content-Type: application/octet-stream\r\n\r\n%s\r\n" % (boundary.encode(), filename, data)
    )
    body = b"".join(parts) + b"--%s--\r\n" % boundary.encode()
    return body, f"multipart/form-data; boundary={boundary}"


@pytest.mark.parametrize(
    ("path", "fields", "filename", "field"),
    [
        ("/v1/assets", {"source_id": b"S\x001"}, b"a.txt", "source_id"),
        ("/v1/assets", {"source_id": b"S1", "workspace_id": b"ws\x00"}, b"a.txt", "workspace_id"),
        ("/v1/assets", {"source_id": b"S1"}, b"a\x00.txt", "filename"),
        ("/v1/artifacts", {"title": b"T\x00"}, b"a.html", "title"),
        ("/v1/artifacts", {"title": b"T"}, b"a\x00.html", "filename"),
    ],
)
def test_unstorable_multipart_fields_and_file_names_are_invalid(
    api: Api, path: str, fields: dict[str, bytes], filename: bytes, field: str
) -> None:
    body, content_type = multipart(fields, filename)
    r = api.http.post(path, content=body, headers={"content-type": content_type})
    assert r.status_code == 422 and error_of(r)["code"] == "invalid", r.text
    assert error_of(r)["details"]["field"] == field


def test_unstorable_plan_text_is_invalid(api: Api) -> None:
    r = api.http.put("/v1/runs/run_x/files/plan.md", content=b"# plan\x00", headers={"content-type": "text/plain"})
    assert r.status_code == 422 and error_of(r)["details"]["field"] == "body", r.text


def chunks(total: int, size: int = 64 * 1024) -> Iterator[bytes]:
    """A JSON body of many tiny objects (costly to parse), sent chunked: no Content-Length."""
    yield b'{"title": "t", "goal": "g", "pad": ['
    sent = 0
    while sent < total:
        piece = b"{}," * (size // 3)
        sent += len(piece)
        yield piece
    yield b"{}]}"


@pytest.mark.parametrize("path", ["/v1/workspaces", "/v1/assets/import", "/v1/publications"])
def test_large_json_bodies_are_refused_before_parsing_and_auth(stack: RunningStack, path: str) -> None:
    with gateway_client(base_url=stack.url, timeout=30) as anonymous:
        declared = b"".join(chunks(2 * MiB))
        r = anonymous.post(path, content=declared, headers={"content-type": "application/json"})
        assert r.status_code == 413, r.text[:300]
        assert error_of(r)["code"] == "too_large" and error_of(r)["details"]["limit"] == MiB
        r = anonymous.post(path, content=chunks(2 * MiB), headers={"content-type": "application/json"})
        assert r.request.headers.get("transfer-encoding") == "chunked" and "content-length" not in r.request.headers
        assert r.status_code == 413 and error_of(r)["code"] == "too_large", r.text[:300]
        assert r.headers.get("x-request-id"), "the early answer carries the request id too"


def test_the_token_is_checked_before_a_body_is_parsed(stack: RunningStack, api: Api) -> None:
    with gateway_client(base_url=stack.url, timeout=30) as anonymous:
        for body in (b"{not json", b'{"title": "t", "goal": "\\u0000"}', b'{"title": "t", "goal": "g"}'):
            r = anonymous.post("/v1/workspaces", content=body, headers={"content-type": "application/json"})
            assert r.status_code == 401 and error_of(r)["code"] == "unauthenticated", r.text
            assert r.headers.get("x-request-id")
        assert anonymous.get("/v1/health").status_code == 200
    # Authenticated, a body under the limit is parsed and validated as usual.
    under = b"".join(chunks(MiB - 128 * 1024))
    assert len(under) < MiB
    r = api.http.post("/v1/workspaces", content=under, headers={"content-type": "application/json"})
    assert r.status_code == 422 and error_of(r)["details"]["field"] == "pad", r.text[:300]
    r = api.http.post("/v1/assets/import", content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code == 422 and error_of(r)["details"]["field"] == "body"


@pytest.mark.parametrize("depth", [900, 5000, 100_000])
def test_deeply_nested_json_is_invalid_not_a_fault(api: Api, depth: int) -> None:
    body = '{"title": "t", "goal": "g", "x": ' + "[" * depth + "]" * depth + "}"
    r = api.http.post("/v1/workspaces", content=body.encode(), headers={"content-type": "application/json"})
    assert r.status_code == 422 and error_of(r)["code"] == "invalid", r.text[:300]
    nul = '{"title": "t", "goal": "g", "x": ' + "[" * depth + '"\\u0000"' + "]" * depth + "}"
    r = api.http.post("/v1/workspaces", content=nul.encode(), headers={"content-type": "application/json"})
    assert r.status_code == 422 and error_of(r)["code"] == "invalid", r.text[:300]


def test_a_method_a_route_does_not_take_is_405_with_allow(api: Api) -> None:
    for method, path in (("DELETE", "/v1/workspaces"), ("PATCH", "/v1/publications"), ("PUT", "/v1/health")):
        r = api.http.request(method, path)
        assert r.status_code == 405, (method, path, r.text)
        assert r.headers.get("x-request-id") and r.json()["error"]["message"]
        allowed = {m.strip() for m in r.headers["allow"].split(",")}
        assert allowed and method not in allowed, r.headers["allow"]


def test_integers_are_integers_and_numbers_are_finite(stack: RunningStack, api: Api) -> None:
    """JSON has integers: `true`, `1.0` and `"60"` are not one; `1e400` and `Infinity` are no number."""
    admin = {"Authorization": f"Bearer {stack.admin_token}"}
    for value in (True, False, "60", 1.5):
        r = httpx.post(
            f"{stack.url}/v1/admin/tokens", json={"scope": "s", "principal": "p", "expires_in": value}, headers=admin
        )
        assert r.status_code == 422 and r.json()["error"]["details"]["field"] == "expires_in", (value, r.text)
    ws = api.workspace()
    for value in (False, "0"):
        r = api.http.put(f"/v1/workspaces/{ws['id']}/checkpoint", json={"expected_revision": value, "summary": "x"})
        assert r.status_code == 422, (value, r.text)
    pub = api.publish("Report", "Body.")
    r = api.http.post(f"/v1/publications/{pub['id']}/versions", json={"body": "v2", "expected_latest_version": "1"})
    assert r.status_code == 422, r.text
    for raw in ('{"max_seconds": 1e400}', '{"max_seconds": Infinity}', '{"max_seconds": NaN}', '{"max_steps": true}'):
        body = '{"question": "q?", "request_id": ' + json.dumps(uuid.uuid4().hex) + ', "limits": ' + raw + "}"
        r = api.http.post(
            f"/v1/workspaces/{ws['id']}/runs", content=body.encode(), headers={"content-type": "application/json"}
        )
        assert r.status_code == 422, (raw, r.text)
    assert (
        api.http.post(
            f"/v1/publications/{pub['id']}/versions", json={"body": "v2", "expected_latest_version": 1}
        ).status_code
        == 201
    )


def test_an_encoded_body_is_refused_unread(api: Api) -> None:
    packed = gzip.compress(json.dumps({"title": "t", "goal": "g" * 100}).encode())
    for encoding in ("gzip", "br", "deflate"):
        headers = {"content-type": "application/json", "content-encoding": encoding}
        r = api.http.post("/v1/workspaces", content=packed, headers=headers)
        assert r.status_code == 415 and r.json()["error"]["details"]["header"] == "Content-Encoding", r.text
    plain = {"content-type": "application/json", "content-encoding": "identity"}
    assert api.http.post("/v1/workspaces", content=b'{"title": "t", "goal": "g"}', headers=plain).status_code == 201


@pytest.mark.parametrize("path", ["/v1/assets", "/v1/artifacts"])
def test_a_form_field_given_twice_is_invalid(api: Api, path: str) -> None:
    name = "source_id" if path == "/v1/assets" else "title"
    body, content_type = multipart({name: b"first"}, b"a.txt", b"text")
    boundary = content_type.split("boundary=")[1].encode()
    twice = b'--%s\r\nContent-Disposition: form-data; name="%s"\r\n\r\nsecond\r\n' % (boundary, name.encode())
    r = api.http.post(path, content=twice + body, headers={"content-type": content_type})
    assert r.status_code == 422 and error_of(r)["details"]["field"] == name, r.text
    file_again = body.replace(b"--%s--" % boundary, b"")
    file_again += b'--%s\r\nContent-Disposition: form-data; name="file"; filename="b.txt"\r\n\r\nmore\r\n--%s--\r\n' % (
        boundary,
        boundary,
    )
    r = api.http.post(path, content=file_again, headers={"content-type": content_type})
    assert r.status_code == 422 and error_of(r)["details"]["field"] == "file", r.text


def raw_exchange(stack: RunningStack, request: bytes) -> tuple[int, dict[str, str], bytes]:
    """One request as raw bytes, and the status, headers and body of the answer."""
    host, port = stack.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as conn:
        conn.sendall(request)
        data = b""
        while chunk := conn.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in header_lines)}
    return int(status_line.split()[1]), headers, body


@pytest.mark.parametrize(
    "request_bytes",
    [
        b"GET /v1/health HTTP/1.1 extra\r\nHost: x\r\n\r\n",
        b"GET /v1/" + b"a" * 70_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
        b"POST /v1/workspaces HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n",
    ],
    ids=["request-line", "long-url", "bad-chunk"],
)
def test_what_the_http_parser_refuses_is_answered_in_the_envelope(stack: RunningStack, request_bytes: bytes) -> None:
    status, headers, body = raw_exchange(stack, request_bytes)
    assert status == 400 and headers["content-type"] == "application/json", (status, headers, body[:200])
    assert json.loads(body)["error"]["code"] == "invalid"
    request_id = headers["x-request-id"]
    probe(lambda: lines_with(stack, "gateway", request_id), timeout=10)


def exchange_with(stack: RunningStack, request_line: str, headers: list[tuple[str, str]], body: bytes = b"") -> Any:
    """`request_line` sent with exactly these header lines (repeats kept): the status and the envelope's error."""
    head = "".join(f"{name}: {value}\r\n" for name, value in headers)
    framing = f"Content-Length: {len(body)}\r\n" if body else ""
    request = f"{request_line} HTTP/1.1\r\n{head}{framing}Connection: close\r\n\r\n".encode("latin-1") + body
    status, answer_headers, answer = raw_exchange(stack, request)
    assert answer_headers["content-type"] == "application/json", (status, answer[:200])
    return status, json.loads(answer).get("error")


# A header a request carries once, with the value a request would give it: two copies could be read two ways
# (a dict of the headers keeps the last copy, Starlette's `headers.get` the first).
SINGLE_HEADERS = {
    "Authorization": "Bearer dsk_not-a-token",
    "X-Run-Lease": "lease",
    "Mcp-Session-Id": "session",
    "Content-Type": "application/json",
    "Host": "y",
}


@pytest.mark.parametrize("header", sorted(SINGLE_HEADERS))
@pytest.mark.parametrize("order", ["given-first", "given-last"])
def test_a_header_given_twice_is_invalid_whichever_copy_is_good(
    stack: RunningStack, api: Api, ids: dict[str, Any], header: str, order: str
) -> None:
    good = {"Host": "x", "Authorization": str(api.http.headers["authorization"])}
    lines = [(name, value) for name, value in good.items() if name != header]
    copies = [(header, good.get(header, SINGLE_HEADERS[header])), (header, SINGLE_HEADERS[header])]
    lines += copies if order == "given-first" else copies[::-1]
    status, error = exchange_with(stack, f"GET /v1/workspaces/{ids['ws']}", lines)
    assert (status, error["code"], error["details"]) == (422, "invalid", {"header": header}), error
    # A write is refused before it is read: the workspace keeps its goal.
    body = json.dumps({"text": "changed by a doubled header", "expected_version": 1}).encode()
    status, error = exchange_with(stack, f"PUT /v1/workspaces/{ids['ws']}/goal", lines, body)
    assert (status, error["details"]) == (422, {"header": header}), error
    assert api.http.get(f"/v1/workspaces/{ids['ws']}").json()["goal"]["version"] == 1


def test_two_tokens_are_refused_on_every_kind_of_route(stack: RunningStack, api: Api) -> None:
    token = str(api.http.headers["authorization"])
    admin = f"Bearer {stack.admin_token}"
    mcp = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode()
    for request_line, pair, body in [
        ("POST /mcp", [token, "Bearer dsk_not-a-token"], mcp),
        ("POST /mcp", ["Bearer dsk_not-a-token", token], mcp),
        ("GET /v1/admin/tokens", [admin, token], b""),
        ("GET /v1/admin/tokens", [token, admin], b""),
        ("GET /v1/workspaces", [token, token], b""),
    ]:
        lines = [("Host", "x"), ("Content-Type", "application/json"), *(("Authorization", t) for t in pair)]
        status, error = exchange_with(stack, request_line, lines, body)
        assert (status, error["code"], error["details"]) == (422, "invalid", {"header": "Authorization"}), (
            request_line,
            error,
        )
    # Once, each is what it was.
    assert api.http.get("/v1/workspaces").status_code == 200


def test_a_query_parameter_given_twice_is_invalid(stack: RunningStack, api: Api) -> None:
    admin = {"Authorization": f"Bearer {stack.admin_token}"}
    checked = 0
    for method, template, params in operations(stack):
        headers = admin if template.startswith("/v1/admin") else None
        path = template
        for name in [p["name"] for p in params if p["in"] == "path"]:
            path = path.replace("{" + name + "}", "x1")
        for name in [p["name"] for p in params if p["in"] == "query"]:
            r = api.http.request(method, path, params=[(name, "1"), (name, "2")], headers=headers)
            assert r.status_code == 422, (method, template, name, r.status_code, r.text[:300])
            assert error_of(r)["details"]["field"] == name, (method, template, r.text)
            checked += 1
    assert checked >= 10
