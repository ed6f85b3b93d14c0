"""The object store's part of a compose backup (shared.objectcopy): a bucket into a folder and back, keys and
bytes, without the gateway's staging of uploads; an import refuses a bucket that holds anything."""

from __future__ import annotations

import io
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from minio import Minio

from shared.natsauth import TESTER_USER
from shared.objectcopy import UnsafeKey, export_objects, import_objects, key_path
from tests.support.infra import Infra

OBJECTS = {
    "sha256/ab/ab12": b"source bytes",
    "runs/run_1/draft.md": b"# draft\n",
    "runs/run_1/deep/er/notes.txt": b"",
}


def _root(infra: Infra) -> Minio:
    """The tester's key, which may list every bucket (as a store's root key may)."""
    access_key, secret_key = infra.s3_keys[TESTER_USER]
    return Minio(infra.s3_endpoint, access_key=access_key, secret_key=secret_key, secure=False, region="us-east-1")


def _bucket(store: Minio, objects: dict[str, bytes]) -> str:
    bucket = f"copy-{uuid.uuid4().hex[:12]}"
    store.make_bucket(bucket)
    for key, data in objects.items():
        store.put_object(bucket, key, io.BytesIO(data), len(data))
    return bucket


def _contents(store: Minio, bucket: str) -> dict[str, bytes]:
    found = {}
    for item in store.list_objects(bucket, recursive=True):
        response = store.get_object(bucket, str(item.object_name))
        try:
            found[str(item.object_name)] = response.read()
        finally:
            response.close()
            response.release_conn()
    return found


def test_a_bucket_goes_into_a_folder_and_back_but_for_uploads(infra: Infra, tmp_path: Path) -> None:
    store = _root(infra)
    source = _bucket(store, OBJECTS | {"uploads/upl_1": b"half an upload"})

    exported = export_objects(store, source, tmp_path / "objects")
    assert (exported.objects, exported.bytes) == (3, sum(map(len, OBJECTS.values())))
    assert not (tmp_path / "objects" / "uploads").exists()

    target = f"copy-{uuid.uuid4().hex[:12]}"  # missing: the import makes it
    imported = import_objects(store, target, tmp_path / "objects")
    assert imported == exported
    assert _contents(store, target) == OBJECTS

    with pytest.raises(FileExistsError, match="is not empty"):
        import_objects(store, target, tmp_path / "objects")


def test_a_key_that_would_leave_the_folder_is_refused(tmp_path: Path) -> None:
    assert key_path(tmp_path, "sha256/ab/ab12") == tmp_path / "sha256" / "ab" / "ab12"
    for key in ("../escape", "runs//x", "/abs", "runs/./x", "runs/x/"):
        with pytest.raises(UnsafeKey):
            key_path(tmp_path, key)


def test_the_command_says_what_it_copied(infra: Infra, tmp_path: Path) -> None:
    store = _root(infra)
    bucket = _bucket(store, OBJECTS)
    access_key, secret_key = infra.s3_keys[TESTER_USER]
    env = {
        "DOSSIER_S3_ENDPOINT": infra.s3_endpoint,
        "DOSSIER_S3_BUCKET": bucket,
        "DOSSIER_S3_ACCESS_KEY": access_key,
        "DOSSIER_S3_SECRET_KEY": secret_key,
    }
    argv = [sys.executable, "-m", "shared.objectcopy", "export", str(tmp_path / "out")]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "export: 3 objects" in done.stderr
    assert (tmp_path / "out" / "runs" / "run_1" / "draft.md").read_bytes() == b"# draft\n"
    # Into the bucket it came from: refused, nothing written.
    again = subprocess.run([*argv[:3], "import", str(tmp_path / "out")], env=env, capture_output=True, text=True)
    assert again.returncode == 2 and "is not empty" in again.stderr, again.stderr
