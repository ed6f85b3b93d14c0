"""A bucket's objects into a folder and back: the object store's part of a compose or Kubernetes backup.

`python -m shared.objectcopy export DIR` writes every object of the bucket to `DIR/<key>`, but for the
gateway's staging of uploads under way (`uploads/`); `python -m shared.objectcopy import DIR` puts every
file under DIR back under its key, into a bucket that must hold nothing yet (a restore never mixes an
archive with what a store holds). The store, bucket and key come from DOSSIER_S3_ENDPOINT, DOSSIER_S3_BUCKET,
DOSSIER_S3_ACCESS_KEY and DOSSIER_S3_SECRET_KEY, and the key must be one that may list the bucket (the
store's root key): no service's key may (shared/objectkeys.py). The services keep what they know of an
object in their databases, so its key and bytes are all there is to copy. deploy/compose-backup.sh,
docs/operations.md "Backup and restore".
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from minio import Minio

from shared.objectkeys import UPLOADS
from shared.settings import CommonSettings


class UnsafeKey(ValueError):
    """A key that names no file inside the folder (`..`, an empty part, a leading `/`)."""


@dataclass(frozen=True)
class Copied:
    objects: int
    bytes: int


def client(settings: CommonSettings) -> Minio:
    return Minio(
        settings.s3_endpoint,
        access_key=settings.s3_access_key,
        secret_key=settings.s3_secret_key,
        secure=settings.s3_secure,
        region="us-east-1",
    )


def key_path(folder: Path, key: str) -> Path:
    """Where `key`'s bytes go under `folder`; refuses a key that would leave it."""
    parts = key.split("/")
    if any(part in ("", ".", "..") for part in parts) or "\\" in key or "\0" in key:
        raise UnsafeKey(f"object key {key!r} is not a plain relative path")
    return folder.joinpath(*parts)


def export_objects(store: Minio, bucket: str, folder: Path) -> Copied:
    """Every object of `bucket` but `uploads/` into `folder` (which may exist), one file per key."""
    count = size = 0
    for item in store.list_objects(bucket, recursive=True):
        key = str(item.object_name)
        if key.startswith(UPLOADS):
            continue
        path = key_path(folder, key)
        path.parent.mkdir(parents=True, exist_ok=True)
        store.fget_object(bucket, key, str(path))
        count, size = count + 1, size + path.stat().st_size
    return Copied(count, size)


def files_under(folder: Path) -> Iterator[tuple[str, Path]]:
    for path in sorted(folder.rglob("*")):
        if path.is_symlink() or not (path.is_file() or path.is_dir()):
            raise UnsafeKey(f"{path} is neither a plain file nor a folder")
        if path.is_file():
            yield path.relative_to(folder).as_posix(), path


def import_objects(store: Minio, bucket: str, folder: Path) -> Copied:
    """Every file under `folder` into `bucket` under its relative path; the bucket is made if missing and must
    be empty."""
    if not store.bucket_exists(bucket):
        store.make_bucket(bucket)
    elif next(iter(store.list_objects(bucket, recursive=True)), None) is not None:
        raise FileExistsError(f"bucket {bucket} is not empty: a restore fills an empty store")
    files = list(files_under(folder))  # every path checked before the first object is written
    for key, path in files:
        store.fput_object(bucket, key, str(path))
    return Copied(len(files), sum(path.stat().st_size for _, path in files))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m shared.objectcopy", description=__doc__.split("\n\n")[0])
    parser.add_argument("direction", choices=("export", "import"))
    parser.add_argument("folder", type=Path)
    args = parser.parse_args(argv)
    settings = CommonSettings()
    store = client(settings)
    os.umask(0o077)
    try:
        if args.direction == "export":
            done = export_objects(store, settings.s3_bucket, args.folder)
        else:
            done = import_objects(store, settings.s3_bucket, args.folder)
    except (UnsafeKey, FileExistsError) as exc:
        print(f"objectcopy: {exc}", file=sys.stderr)
        return 2
    print(f"{args.direction}: {done.objects} objects, {done.bytes} bytes", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
