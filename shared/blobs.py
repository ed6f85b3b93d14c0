"""Object storage through the minio client (MinIO in deployments, localbucket locally).

The minio client is synchronous, so every call runs in a worker thread. Keys for retained bytes are
content-addressed (`sha256/ab/abcdef…`); run working files live under `runs/<run_id>/`.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from minio import Minio
from minio.commonconfig import CopySource
from minio.error import S3Error

from shared.settings import CommonSettings

# S3's smallest multipart part: what one streamed upload holds in memory at most (plus its queue).
PART_SIZE = 5 * 1024 * 1024
_CHUNK = 1024 * 1024


class TooManyBytes(Exception):
    """The object is larger than the reader's limit; nothing past the limit was kept."""


def content_key(sha256_hex: str, prefix: str = "sha256") -> str:
    return f"{prefix}/{sha256_hex[:2]}/{sha256_hex}"


@dataclass(frozen=True)
class BlobRef:
    bucket: str
    key: str
    sha256: str
    size: int


class Blobs:
    def __init__(self, settings: CommonSettings):
        self.bucket = settings.s3_bucket
        self._client = Minio(
            settings.s3_endpoint,
            access_key=settings.s3_access_key,
            secret_key=settings.s3_secret_key,
            secure=settings.s3_secure,
            region="us-east-1",
        )

    async def ensure_bucket(self) -> None:
        def run() -> None:
            try:
                exists = self._client.bucket_exists(self.bucket)
            except S3Error as exc:
                # A key limited to its own prefixes may not even ask (MinIO counts HEAD of a bucket as a
                # listing): the operator made the bucket (deploy/minio/init-users.sh).
                if exc.code == "AccessDenied":
                    return
                raise
            if not exists:
                try:
                    self._client.make_bucket(self.bucket)
                except S3Error as exc:
                    if exc.code not in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
                        raise

        await asyncio.to_thread(run)

    async def put_bytes(self, key: str, data: bytes, content_type: str = "application/octet-stream") -> None:
        await asyncio.to_thread(
            self._client.put_object, self.bucket, key, io.BytesIO(data), len(data), content_type=content_type
        )

    async def put_file(self, key: str, path: str, content_type: str = "application/octet-stream") -> None:
        await asyncio.to_thread(self._client.fput_object, self.bucket, key, path, content_type=content_type)

    async def put_stream(self, key: str, stream: BinaryIO, content_type: str = "application/octet-stream") -> None:
        """A multipart upload of unknown length, read from `stream` one part at a time (in a worker thread)."""
        await asyncio.to_thread(
            self._client.put_object, self.bucket, key, stream, -1, content_type=content_type, part_size=PART_SIZE
        )

    async def copy(self, source_key: str, key: str) -> None:
        await asyncio.to_thread(self._client.copy_object, self.bucket, key, CopySource(self.bucket, source_key))

    async def download(self, key: str, path: Path, *, max_bytes: int) -> tuple[str, int]:
        """Stream the object into `path` chunk by chunk, hashing on the way; returns (sha256, size)."""

        def run() -> tuple[str, int]:
            digest, size = hashlib.sha256(), 0
            response = self._client.get_object(self.bucket, key)
            try:
                with open(path, "wb") as out:
                    for chunk in response.stream(_CHUNK):
                        size += len(chunk)
                        if size > max_bytes:
                            raise TooManyBytes(key)
                        digest.update(chunk)
                        out.write(chunk)
            finally:
                response.close()
                response.release_conn()
            return digest.hexdigest(), size

        return await asyncio.to_thread(run)

    async def get_bytes(self, key: str, *, offset: int = 0, length: int = 0) -> bytes:
        def run() -> bytes:
            response = self._client.get_object(self.bucket, key, offset=offset, length=length)
            try:
                return response.read()
            finally:
                response.close()
                response.release_conn()

        return await asyncio.to_thread(run)

    async def exists(self, key: str) -> bool:
        def run() -> bool:
            try:
                self._client.stat_object(self.bucket, key)
            except S3Error as exc:
                if exc.code in ("NoSuchKey", "NoSuchObject", "NotFound"):
                    return False
                raise
            return True

        return await asyncio.to_thread(run)

    async def list(self, prefix: str) -> list[tuple[str, int]]:
        def run() -> list[tuple[str, int]]:
            objects = self._client.list_objects(self.bucket, prefix=prefix, recursive=True)
            return [(o.object_name, o.size or 0) for o in objects if o.object_name]

        return await asyncio.to_thread(run)

    async def delete(self, key: str) -> None:
        await asyncio.to_thread(self._client.remove_object, self.bucket, key)
