"""Streaming multipart uploads: the byte limit is enforced while the body streams in, never after.

The file part is hashed (sha256) as it arrives and either spooled to a bounded temporary file
(`read_multipart`) or streamed straight into object storage (`stream_multipart`, for asset uploads);
only `{bucket, key, sha256, size}` then travels on the bus. Small text fields are capped too.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path

from fastapi import Request
from python_multipart.multipart import MultipartParser, parse_options_header
from starlette.requests import ClientDisconnect

from services.gateway.transport.upload_sink import ObjectSink, upload_key
from shared.blobs import Blobs
from shared.errors import Invalid, TooLarge
from shared.storable import require_storable

MAX_FIELD_BYTES = 64 * 1024
MAX_PARTS = 16


@dataclass
class UploadedFile:
    filename: str
    content_type: str
    path: Path
    size: int
    sha256: str

    def discard(self) -> None:
        self.path.unlink(missing_ok=True)


@dataclass
class StoredUpload:
    """A file part that is already in object storage under `key` (not yet its content key)."""

    filename: str
    content_type: str
    key: str
    size: int
    sha256: str


@dataclass
class _Part:
    headers: dict[str, str] = field(default_factory=dict)
    name: str = ""
    filename: str | None = None
    data: bytearray = field(default_factory=bytearray)


class _Collector:
    def __init__(self, file_field: str, max_file_bytes: int, spool_dir: str | None, store: Blobs | None = None):
        self.file_field = file_field
        self._store = store
        self.sink: ObjectSink | None = None
        self.max_file_bytes = max_file_bytes
        self.fields: dict[str, str] = {}
        self.upload: UploadedFile | None = None
        self.stored: StoredUpload | None = None
        self._spool_dir = spool_dir
        self._part = _Part()
        self._header_field = bytearray()
        self._header_value = bytearray()
        self._parts = 0
        self._file: tempfile._TemporaryFileWrapper[bytes] | None = None
        self._hash = hashlib.sha256()
        self._size = 0

    # MultipartParser callbacks -------------------------------------------------------------------
    def on_part_begin(self) -> None:
        self._parts += 1
        if self._parts > MAX_PARTS:
            raise Invalid("too many parts in the multipart body", {"field": "body", "limit": MAX_PARTS})
        self._part = _Part()

    def on_header_field(self, data: bytes, start: int, end: int) -> None:
        self._header_field += data[start:end]

    def on_header_value(self, data: bytes, start: int, end: int) -> None:
        self._header_value += data[start:end]

    def on_header_end(self) -> None:
        self._part.headers[self._header_field.decode("latin-1").lower()] = self._header_value.decode("utf-8", "replace")
        self._header_field.clear()
        self._header_value.clear()

    def on_headers_finished(self) -> None:
        disposition = self._part.headers.get("content-disposition", "")
        _, params = parse_options_header(disposition)
        self._part.name = params.get(b"name", b"").decode("utf-8", "replace")
        filename = params.get(b"filename")
        self._part.filename = filename.decode("utf-8", "replace") if filename is not None else None
        if self._part.name == self.file_field:
            if self._file is not None or self.sink is not None:
                raise Invalid(f"only one '{self.file_field}' part is accepted", {"field": self.file_field})
            if self._store is not None:
                self.sink = ObjectSink(self._store, upload_key())
            else:
                self._file = tempfile.NamedTemporaryFile(prefix="dossier-upload-", dir=self._spool_dir, delete=False)

    def on_part_data(self, data: bytes, start: int, end: int) -> None:
        chunk = data[start:end]
        sink = self.sink if self.sink is not None else self._file
        if self._part.name == self.file_field and sink is not None:
            self._size += len(chunk)
            if self._size > self.max_file_bytes:
                raise TooLarge(
                    "the file is larger than the limit", {"field": self.file_field, "limit": self.max_file_bytes}
                )
            self._hash.update(chunk)
            sink.write(chunk)
        else:
            self._part.data += chunk
            if len(self._part.data) > MAX_FIELD_BYTES:
                raise TooLarge(
                    f"the field '{self._part.name}' is too long", {"field": self._part.name, "limit": MAX_FIELD_BYTES}
                )

    def on_part_end(self) -> None:
        if self._part.name in self.fields or (
            self._part.name == self.file_field and (self.stored is not None or self.upload is not None)
        ):
            # Two parts of one name: which one was meant is the caller's to say, not ours to guess.
            raise Invalid(f"the field '{self._part.name}' is given more than once", {"field": self._part.name})
        if self._part.name == self.file_field and self.sink is not None and self.stored is None:
            self.stored = StoredUpload(
                filename=os.path.basename(self._part.filename or "upload"),
                content_type=self._part.headers.get("content-type", "application/octet-stream"),
                key=self.sink.key,
                size=self._size,
                sha256=self._hash.hexdigest(),
            )
        elif self._part.name == self.file_field and self._file is not None and self.upload is None:
            self._file.close()
            self.upload = UploadedFile(
                filename=os.path.basename(self._part.filename or "upload"),
                content_type=self._part.headers.get("content-type", "application/octet-stream"),
                path=Path(self._file.name),
                size=self._size,
                sha256=self._hash.hexdigest(),
            )
        elif self._part.name:
            self.fields[self._part.name] = self._part.data.decode("utf-8", "replace")

    def cleanup(self) -> None:
        if self._file is not None:
            self._file.close()
            Path(self._file.name).unlink(missing_ok=True)


async def read_multipart(
    request: Request, *, file_field: str = "file", max_file_bytes: int, spool_dir: str | None = None
) -> tuple[dict[str, str], UploadedFile]:
    """Parse `multipart/form-data` from the request stream. The caller must `discard()` the upload."""
    collector = _Collector(file_field, max_file_bytes, spool_dir)
    try:
        await _parse(request, collector)
        if collector.upload is None:
            raise Invalid(f"the '{file_field}' part is missing", {"field": file_field})
        _require_storable_text(collector.fields, collector.upload.filename)
    except BaseException:
        collector.cleanup()
        raise
    return collector.fields, collector.upload


async def stream_multipart(
    request: Request, store: Blobs, *, file_field: str = "file", max_file_bytes: int
) -> tuple[dict[str, str], StoredUpload]:
    """Parse `multipart/form-data`, streaming the file part into object storage as it arrives.

    The caller owns the stored object (`key`) afterwards: it moves it to its content key or deletes it.
    """
    collector = _Collector(file_field, max_file_bytes, None, store)
    try:
        await _parse(request, collector)
        if collector.stored is None or collector.sink is None:
            raise Invalid(f"the '{file_field}' part is missing", {"field": file_field})
        _require_storable_text(collector.fields, collector.stored.filename)
        await collector.sink.finish()
    except BaseException:
        if collector.sink is not None:
            await collector.sink.abort()
        raise
    return collector.fields, collector.stored


def only_fields(fields: dict[str, str], allowed: tuple[str, ...]) -> None:
    """A route's form takes its own fields only, as its JSON bodies do (`extra="forbid"`): a misspelt
    field is refused, not silently dropped."""
    for name in fields:
        if name not in allowed:
            raise Invalid(f"the form has no field '{name[:100]}'", {"field": name[:100], "allowed": list(allowed)})


def _require_storable_text(fields: dict[str, str], filename: str) -> None:
    """The API's error rules (docs/api.md): U+0000 in a field or the file name is `invalid`, naming it (fields decode with
    replacement, so no lone surrogate survives)."""
    require_storable(fields)
    require_storable(filename, "filename")


async def _parse(request: Request, collector: _Collector) -> None:
    content_type, params = parse_options_header(request.headers.get("content-type", ""))
    boundary = params.get(b"boundary")
    if content_type != b"multipart/form-data" or not boundary:
        raise Invalid("the body must be multipart/form-data", {"field": "body"})
    parser = MultipartParser(
        boundary,
        {
            "on_part_begin": collector.on_part_begin,
            "on_part_data": collector.on_part_data,
            "on_part_end": collector.on_part_end,
            "on_header_field": collector.on_header_field,
            "on_header_value": collector.on_header_value,
            "on_header_end": collector.on_header_end,
            "on_headers_finished": collector.on_headers_finished,
        },
    )
    async for chunk in _chunks(request):
        _feed(parser.write, chunk)
        if collector.sink is not None:
            # Outside the parser's error mapping: a store that fails is a fault, not a malformed body.
            await collector.sink.flush_pending()
    _feed(lambda _: parser.finalize(), b"")


def _feed(step: Callable[[bytes], object], chunk: bytes) -> None:
    try:
        step(chunk)
    except (Invalid, TooLarge):
        raise
    except Exception as exc:
        raise Invalid("the multipart body is malformed", {"field": "body"}) from exc


async def _chunks(request: Request) -> AsyncIterator[bytes]:
    try:
        async for chunk in request.stream():
            if chunk:
                yield chunk
    except ClientDisconnect as exc:
        raise Invalid("the multipart body ended early", {"field": "body"}) from exc
