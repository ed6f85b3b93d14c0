"""The streaming multipart reader: limit while streaming, fields, malformed bodies."""

from __future__ import annotations

import hashlib

import pytest
from starlette.requests import Request

from services.gateway.transport.uploads import read_multipart
from shared.errors import Invalid, TooLarge

BOUNDARY = "xBOUNDARYx"


def body(parts: list[tuple[str, str | None, bytes]]) -> bytes:
    out = b""
    for name, filename, data in parts:
        disp = f'form-data; name="{name}"' + (f'; filename="{filename}"' if filename else "")
        out += f"--{BOUNDARY}\r\nContent-Disposition: {disp}\r\n".encode()
        if filename:
            out += b"Content-Type: application/pdf\r\n"
        out += b"\r\n" + data + b"\r\n"
    return out + f"--{BOUNDARY}--\r\n".encode()


def request(raw: bytes, content_type: str | None = None, chunk: int = 7) -> tuple[Request, list[int]]:
    delivered: list[int] = []
    chunks = [raw[i : i + chunk] for i in range(0, len(raw), chunk)] or [b""]

    async def receive() -> dict[str, object]:
        data = chunks.pop(0) if chunks else b""
        delivered.append(len(data))
        return {"type": "http.request", "body": data, "more_body": bool(chunks)}

    ctype = content_type or f"multipart/form-data; boundary={BOUNDARY}"
    scope = {"type": "http", "method": "POST", "path": "/", "headers": [(b"content-type", ctype.encode())]}
    return Request(scope, receive), delivered


async def test_file_and_fields_are_read_and_hashed() -> None:
    data = bytes(range(256)) * 40
    req, _ = request(body([("source_id", None, b"S17"), ("file", "../../etc/a.pdf", data)]))
    fields, upload = await read_multipart(req, max_file_bytes=len(data))
    try:
        assert fields == {"source_id": "S17"}
        assert upload.size == len(data) and upload.sha256 == hashlib.sha256(data).hexdigest()
        assert upload.filename == "a.pdf" and upload.content_type == "application/pdf"
        assert upload.path.read_bytes() == data
    finally:
        upload.discard()
    assert not upload.path.exists()


async def test_limit_is_enforced_while_streaming() -> None:
    raw = body([("file", "big.bin", b"x" * 100_000)])
    req, delivered = request(raw, chunk=1000)
    with pytest.raises(TooLarge) as err:
        await read_multipart(req, max_file_bytes=10_000)
    assert err.value.details["limit"] == 10_000
    assert sum(delivered) < len(raw) / 2, "the reader stopped long before the end of the body"


@pytest.mark.parametrize(
    ("raw", "ctype"),
    [
        (b"{}", "application/json"),
        (b"garbage", None),
        (body([("source_id", None, b"S1")]), None),
    ],
)
async def test_malformed_or_missing_file_is_invalid(raw: bytes, ctype: str | None) -> None:
    req, _ = request(raw, ctype)
    with pytest.raises(Invalid):
        await read_multipart(req, max_file_bytes=1000)


async def test_oversized_text_field_is_refused() -> None:
    req, _ = request(body([("title", None, b"t" * 70_000), ("file", "a.html", b"<p>x</p>")]), chunk=4096)
    with pytest.raises(TooLarge):
        await read_multipart(req, max_file_bytes=1000)
