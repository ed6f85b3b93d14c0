"""Each process's object-store key reaches only its own objects (docs/security.md, "Object keys").

The bucket holds what a running stack holds: an uploaded document under its content key, a staged
upload, a run's `draft.md`. Each key then tries what a leaked key would: read, list, copy (from either
end) and multipart-upload past its prefixes. The server refuses with 403 AccessDenied. Raw requests, signed
with a key as any client would sign them, then try what no client library sends: a header twice (once for
the rules, once for the copy), a copy source spelt another way. The server refuses them before any copy.

The rules are the project's own S3 server's (devstack/objectstore.py, shared/objectkeys.py), so this module
runs that server itself, whichever object store the other service tests are given (MinIO holds the same
rules as policies: deploy/minio, compared with the code by tests/unit/deploy).
"""

from __future__ import annotations

import hashlib
import http.client
import io
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from minio import Minio
from minio.commonconfig import CopySource
from minio.credentials import Credentials
from minio.datatypes import Part
from minio.error import S3Error
from minio.signer import sign_v4_s3
from minio.time import to_amz_date

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


def test_runhost_deletes_run_files_only(infra: ObjectStore, bucket: str) -> None:
    """Runhost lets go of run files (retention, contents no run names), and of nothing else."""
    runhost = _client(infra, "runhost")
    for key in (DOC_KEY, STAGED_KEY):
        _denied(lambda k=key: runhost.remove_object(bucket, k))
    for process in ("gateway", "assets", "artifact"):
        _denied(lambda p=process: _client(infra, p).remove_object(bucket, DRAFT_KEY))
    runhost.remove_object(bucket, DRAFT_KEY)
    with pytest.raises(S3Error):
        _client(infra, "tester").stat_object(bucket, DRAFT_KEY)


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


EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()


def _raw(
    infra: ObjectStore,
    process: str,
    method: str,
    path: str,
    signed: dict[str, str] | None = None,
    unsigned: tuple[tuple[str, str], ...] = (),
) -> tuple[int, bytes]:
    """A request signed with the process's key over `signed`, with `unsigned` headers sent before those."""
    access_key, secret_key = infra.s3_keys[process]
    now = datetime.now(UTC)
    headers = {
        "Host": infra.s3_endpoint,
        "x-amz-date": to_amz_date(now),
        "x-amz-content-sha256": EMPTY_SHA256,
        **(signed or {}),
    }
    url = urlsplit(f"http://{infra.s3_endpoint}{path}")
    sign_v4_s3(
        method=method,
        url=url,
        region="us-east-1",
        headers=headers,  # type: ignore[arg-type]
        credentials=Credentials(access_key, secret_key),
        content_sha256=EMPTY_SHA256,
        date=now,
    )
    connection = http.client.HTTPConnection(infra.s3_endpoint, timeout=30)
    try:
        # http.client sends headers as given, in order, repeated ones included (a client library would not).
        connection.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        for name, value in (*unsigned, *headers.items()):
            connection.putheader(name, value)
        connection.endheaders()
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def _refused(answer: tuple[int, bytes]) -> None:
    status, body = answer
    assert status in (400, 403) and b"<Error><Code>" in body, answer


def _absent(infra: ObjectStore, bucket: str, key: str) -> None:
    with pytest.raises(S3Error) as missing:
        _client(infra, "tester").stat_object(bucket, key)
    assert missing.value.code == "NoSuchKey", missing.value


# Each attack: the key, where it copies to, the source the rules would see (the key may read it) and the one
# it means the server to copy from (the key may not read it), written as (header name, value).
SOURCE_TWICE = {
    # With runhost's key, an uploaded document into runs/, where runhost reads.
    "runhost-document-into-runs": ("runhost", "runs/run_1/stolen", DRAFT_KEY, ("x-amz-copy-source", "/{b}/" + DOC_KEY)),
    # With assets' key, a run's draft into sha256/, where assets reads.
    "assets-draft-into-sha256": ("assets", content_key("1" * 64), DOC_KEY, ("x-amz-copy-source", "/{b}/" + DRAFT_KEY)),
    "name-in-other-case": ("runhost", "runs/run_1/stolen", DRAFT_KEY, ("X-Amz-Copy-Source", "/{b}/" + DOC_KEY)),
    "url-encoded-without-slash": (
        "runhost",
        "runs/run_1/stolen",
        DRAFT_KEY,
        ("x-amz-copy-source", "{b}%2F" + DOC_KEY.replace("/", "%2F")),
    ),
    "allowed-one-with-version": (
        "runhost",
        "runs/run_1/stolen",
        DRAFT_KEY + "?versionId=null",
        ("x-amz-copy-source", "/{b}/" + DOC_KEY),
    ),
}


@pytest.mark.parametrize(("process", "target", "allowed", "smuggled"), SOURCE_TWICE.values(), ids=SOURCE_TWICE)
def test_a_copy_source_given_twice_is_refused_and_nothing_is_copied(
    infra: ObjectStore, bucket: str, process: str, target: str, allowed: str, smuggled: tuple[str, str]
) -> None:
    name, value = smuggled
    answer = _raw(
        infra,
        process,
        "PUT",
        f"/{bucket}/{target}",
        signed={"x-amz-copy-source": f"/{bucket}/{allowed}"},
        unsigned=((name, value.format(b=bucket)),),
    )
    _refused(answer)
    _absent(infra, bucket, target)


def test_a_part_copied_with_its_source_given_twice_is_refused(infra: ObjectStore, bucket: str) -> None:
    runhost = _client(infra, "runhost")
    upload_id = runhost._create_multipart_upload(bucket, "runs/run_1/big", {})
    answer = _raw(
        infra,
        "runhost",
        "PUT",
        f"/{bucket}/runs/run_1/big?partNumber=1&uploadId={upload_id}",
        signed={"x-amz-copy-source": f"/{bucket}/{DRAFT_KEY}", "x-amz-copy-source-range": "bytes=0-3"},
        unsigned=(("x-amz-copy-source", f"/{bucket}/{DOC_KEY}"),),
    )
    _refused(answer)
    # Had the part been copied, its bytes and ETag would be the document's first four.
    copied = Part(1, hashlib.md5(DOCUMENT[:4]).hexdigest())
    with pytest.raises(S3Error) as missing:
        runhost._complete_multipart_upload(bucket, "runs/run_1/big", upload_id, [copied])
    assert missing.value.code == "InvalidPart", missing.value
    _absent(infra, bucket, "runs/run_1/big")


SOURCE_SPELT_OTHERWISE = {
    "dot-segments": ("/{b}/runs/../" + DOC_KEY, ""),
    "dot-segments-encoded": ("/{b}/runs%2F..%2F" + DOC_KEY, ""),
    "empty-segment": ("/{b}/runs//../" + DOC_KEY, ""),
    # S3 can take a copy source as a query parameter of a presigned request; this server does not.
    "in-the-query": ("/{b}/" + DRAFT_KEY, "?x-amz-copy-source=%2F{b}%2F" + DOC_KEY.replace("/", "%2F")),
}


@pytest.mark.parametrize(("source", "query"), SOURCE_SPELT_OTHERWISE.values(), ids=SOURCE_SPELT_OTHERWISE)
def test_a_copy_source_spelt_another_way_is_refused(infra: ObjectStore, bucket: str, source: str, query: str) -> None:
    target = "runs/run_1/stolen"
    answer = _raw(
        infra,
        "runhost",
        "PUT",
        f"/{bucket}/{target}{query.format(b=bucket)}",
        signed={"x-amz-copy-source": source.format(b=bucket)},
    )
    _refused(answer)
    _absent(infra, bucket, target)


# Headers that say who asks, what is read or written, and how much: a second one is never read the same way
# by the signature check, the rules and the server.
ONCE_ONLY = (
    "Authorization",
    "Host",
    "x-amz-date",
    "X-Amz-Content-Sha256",
    "x-amz-security-token",
    "x-amz-copy-source-range",
    "Content-Length",
    "Transfer-Encoding",
    "Range",
)


@pytest.mark.parametrize("name", ONCE_ONLY)
def test_a_request_naming_a_deciding_header_twice_is_refused(infra: ObjectStore, bucket: str, name: str) -> None:
    # A read runhost may make; the only thing wrong with it is the header it carries twice.
    values = {"Content-Length": "0", "Transfer-Encoding": "identity", "Range": "bytes=0-1"}
    signed = {"Range": "bytes=0-1"} if name == "Range" else {}
    first = _raw(infra, "runhost", "GET", f"/{bucket}/{DRAFT_KEY}", signed=signed)
    assert first[0] in (200, 206), first
    # Sent twice before the signed headers: once more than any of them may be, whether signed or not.
    twice = ((name, values.get(name, "x")),) * 2
    answer = _raw(infra, "runhost", "GET", f"/{bucket}/{DRAFT_KEY}", signed=signed, unsigned=twice)
    _refused(answer)


def test_a_query_parameter_given_twice_is_refused(infra: ObjectStore, bucket: str) -> None:
    path = f"/{bucket}/{DRAFT_KEY}?response-content-type=text%2Fplain&response-content-type=text%2Fhtml"
    _refused(_raw(infra, "runhost", "GET", path))
