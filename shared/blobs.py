"""Object storage through the minio client (MinIO in deployments, localbucket locally).

The minio client is synchronous, so every call runs in a worker thread. Keys for retained bytes are
content-addressed (`sha256/ab/abcdef…`); run working files live under `runs/<run_id>/`.
"""

from __future__ import annotations

import asyncio
import io
from dataclasses import dataclass

from minio import Minio
from minio.error import S3Error

from shared.settings import CommonSettings


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
            if not self._client.bucket_exists(self.bucket):
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
