"""An upload never trusts bytes it did not write (docs/security.md, "Object keys").

A key that may write content-addressed objects (runhost's, for its reports) plants garbage under the
content key of a document and of an HTML file before a user uploads them. The uploads then write their
own bytes over it: the upload succeeds and what is stored and served is what the user sent.
"""

from __future__ import annotations

import hashlib
import io
import uuid

from minio import Minio

from shared.blobs import content_key
from tests.support.api import Api
from tests.support.documents import pdf
from tests.support.stack import RunningStack

PLANTED = b"planted by another key"


def _client(stack: RunningStack, process: str) -> Minio:
    secret = stack.s3_secret(process)
    return Minio(
        stack.s3_endpoint(), access_key=f"dossier-{process}", secret_key=secret, secure=False, region="us-east-1"
    )


def _plant(stack: RunningStack, data: bytes) -> str:
    key = content_key(hashlib.sha256(data).hexdigest())
    _client(stack, "runhost").put_object("dossier", key, io.BytesIO(PLANTED), len(PLANTED))
    return key


def _stored(stack: RunningStack, key: str) -> bytes:
    response = _client(stack, "gateway").get_object("dossier", key)
    try:
        return bytes(response.read())
    finally:
        response.close()
        response.release_conn()


def test_a_planted_document_is_overwritten_by_the_upload(stack: RunningStack) -> None:
    api = Api(stack)
    data = pdf([f"Fund X board minutes {uuid.uuid4().hex}"])
    key = _plant(stack, data)
    version = api.upload(data, "minutes", "minutes.pdf")
    assert version["content_hash"] == hashlib.sha256(data).hexdigest()
    assert _stored(stack, key) == data


def test_a_planted_artifact_is_overwritten_by_the_upload(stack: RunningStack) -> None:
    api = Api(stack)
    data = f"<!doctype html><p>report {uuid.uuid4().hex}</p>".encode()
    key = _plant(stack, data)
    files = {"file": ("report.html", data, "text/html")}
    artifact = api.ok("POST", "/v1/artifacts", files=files, data={"title": "Report"})
    assert api.http.get(f"/v1/artifacts/{artifact['id']}/content").content == data
    assert _stored(stack, key) == data
