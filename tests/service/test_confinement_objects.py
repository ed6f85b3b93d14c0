"""Each process's object-store key reaches only its own objects (docs/security.md, "Object keys").

The bucket holds what a running stack holds: an uploaded document under its content key, a staged
upload, a run's `draft.md`. Each key then tries what a leaked key would: read, list, copy (from either
end) and multipart-upload past its prefixes. The server refuses with 403 AccessDenied.

The rules are the project's own S3 server's (devstack/objectstore.py, shared/objectkeys.py), so this module
runs that server itself, whichever object store the other service tests are given (MinIO holds the same
rules as policies: deploy/minio, compared with the code by tests/unit/deploy).
"""

from __future__ import annotations

import hashlib
import io
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from minio import Minio
from minio.commonconfig import CopySource
from minio.error import S3Error

from devstack.infra import s3_child
from devstack.procs import free_port, port_open
from shared.blobs import content_key
from shared.children import wait_until
from shared.contracts.common import ALL_PROCESSES
from shared.objectkeys import key_entry
from shared.secretfiles import new_password, private_folder


@dataclass
class ObjectStore:
    s3_endpoint: str
    s3_keys: dict[str, tuple[str, str]]


@pytest.fixture(scope="module")
def infra(dossier_homes: Callable[[str], Path]) -> Iterator[ObjectStore]:
    """The project's S3 server, each process's key held to its prefixes in any bucket; `tester` unbound."""
    home = private_folder(dossier_homes("objects"))
    keys = {name: (f"key-{name}", new_password()) for name in (*ALL_PROCESSES, "tester")}
    served = {key: key_entry(name, secret, ["*"]) for name, (key, secret) in keys.items() if name != "tester"}
    served[keys["tester"][0]] = {"secret": keys["tester"][1], "buckets": ["*"]}
    port = free_port()
    server = s3_child(home, port, {}, served)
    server.start()
    try:
        wait_until(lambda: port_open(port), timeout=60, what="the S3 server", alive=server.alive)
        yield ObjectStore(f"127.0.0.1:{port}", keys)
    finally:
        server.stop()


DOCUMENT = b"%PDF-1.7 tenant A's board minutes"
DOC_KEY = content_key(hashlib.sha256(DOCUMENT).hexdigest())
DRAFT_KEY = "runs/run_1/draft.md"
STAGED_KEY = "uploads/u1"


def _client(infra: ObjectStore, process: str) -> Minio:
    access_key, secret_key = infra.s3_keys[process]
    return Minio(infra.s3_endpoint, access_key=access_key, secret_key=secret_key, secure=False, region="us-east-1")


@pytest.fixture
def bucket(infra: ObjectStore) -> str:
    name = f"conf-{uuid.uuid4().hex[:10]}"
    tester = _client(infra, "tester")
    tester.make_bucket(name)
    for key, data in ((DOC_KEY, DOCUMENT), (DRAFT_KEY, b"# draft of run 1"), (STAGED_KEY, b"staged")):
        tester.put_object(name, key, io.BytesIO(data), len(data))
    return name


def _denied(call: object) -> None:
    with pytest.raises(S3Error) as refused:
        call()  # type: ignore[operator]
    assert refused.value.code == "AccessDenied", refused.value


@pytest.mark.parametrize(
    ("process", "forbidden"),
    [
        # The artifact service's key read uploaded documents and runs' draft.md.
        ("artifact", [DOC_KEY, DRAFT_KEY, STAGED_KEY]),
        ("assets", [DRAFT_KEY, STAGED_KEY]),
        ("runhost", [DOC_KEY, STAGED_KEY]),
        ("gateway", [DRAFT_KEY]),
        ("workspace", [DOC_KEY, DRAFT_KEY, STAGED_KEY]),
    ],
)
def test_a_key_reads_and_lists_nothing_beyond_its_own(
    infra: ObjectStore, bucket: str, process: str, forbidden: list[str]
) -> None:
    client = _client(infra, process)
    for key in forbidden:
        _denied(lambda k=key: client.get_object(bucket, k))
        # A presigned URL made with the key is refused the same way.
        presigned = httpx.get(client.presigned_get_object(bucket, key))
        assert presigned.status_code == 403 and b"AccessDenied" in presigned.content
    for prefix in ("", "sha256/", "runs/", "uploads/"):
        _denied(lambda p=prefix: list(client.list_objects(bucket, prefix=p, recursive=True)))


def test_the_artifact_key_may_only_ask_whether_bytes_are_there(infra: ObjectStore, bucket: str) -> None:
    client = _client(infra, "artifact")
    assert client.stat_object(bucket, DOC_KEY).size == len(DOCUMENT)
    _denied(lambda: client.put_object(bucket, DOC_KEY, io.BytesIO(b"planted"), 7))
    _denied(lambda: client.remove_object(bucket, DOC_KEY))


def test_a_copy_is_checked_at_both_ends(infra: ObjectStore, bucket: str) -> None:
    # Runhost may write under runs/, but not take a document there.
    _denied(lambda: _client(infra, "runhost").copy_object(bucket, "runs/run_1/stolen", CopySource(bucket, DOC_KEY)))
    # Assets may read the document, but not put it where runhost reads.
    _denied(lambda: _client(infra, "assets").copy_object(bucket, "runs/run_1/planted", CopySource(bucket, DOC_KEY)))
    # The gateway may not copy a run's draft into the content-addressed store.
    _denied(lambda: _client(infra, "gateway").copy_object(bucket, DOC_KEY, CopySource(bucket, DRAFT_KEY)))
    # The gateway's own move, staged upload → content key, is allowed.
    _client(infra, "gateway").copy_object(bucket, content_key("0" * 64), CopySource(bucket, STAGED_KEY))


def test_every_step_of_a_multipart_upload_is_checked(infra: ObjectStore, bucket: str) -> None:
    gateway, runhost = _client(infra, "gateway"), _client(infra, "runhost")
    _denied(lambda: runhost._create_multipart_upload(bucket, "uploads/u2", {}))
    upload_id = gateway._create_multipart_upload(bucket, "uploads/u2", {})
    # A part into the gateway's upload, with its upload id, from another key.
    _denied(lambda: runhost._upload_part(bucket, "uploads/u2", b"x" * 16, None, upload_id, 1))
    _denied(
        lambda: _client(infra, "artifact").put_object(
            bucket, DOC_KEY, io.BytesIO(b"y" * 16), -1, part_size=5 * 1024 * 1024
        )
    )
