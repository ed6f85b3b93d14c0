"""A file part streamed to the object store while the request body still arrives.

The multipart parser hands chunks over on the event loop; a worker thread runs the S3 multipart upload
(length unknown, one part in memory at a time) and reads them from a small bounded queue. When the queue
is full the request stream waits, so a slow store slows the client down instead of filling memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import queue
import uuid

from shared.blobs import Blobs

QUEUE_CHUNKS = 16
_EOF = b""


class UploadAborted(Exception):
    """The request ended without a whole file; the partial multipart upload is abandoned."""


def upload_key() -> str:
    """Where a file lands while its hash is still unknown; moved to its content key afterwards."""
    return f"uploads/{uuid.uuid4().hex}"


class ObjectSink(io.RawIOBase):
    def __init__(self, blobs: Blobs, key: str):
        super().__init__()
        self.blobs, self.key = blobs, key
        self._queue: queue.Queue[bytes | BaseException] = queue.Queue(maxsize=QUEUE_CHUNKS)
        self._pending: list[bytes] = []
        self._buffer = bytearray()
        self._eof = False
        self._task = asyncio.get_running_loop().create_task(blobs.put_stream(key, self))  # type: ignore[arg-type]

    # -- the event loop side ------------------------------------------------------------------------
    def write(self, chunk: bytes) -> int:  # type: ignore[override]
        """Called by the parser's callback; the bytes are handed over at the next `flush`."""
        self._pending.append(bytes(chunk))
        return len(chunk)

    async def flush_pending(self) -> None:
        pending, self._pending = self._pending, []
        for chunk in pending:
            if chunk:
                await self._hand_over(chunk)

    async def _hand_over(self, item: bytes | BaseException) -> None:
        while True:
            if self._task.done():
                self._task.result()
                raise UploadAborted("the object store stopped reading the upload")
            try:
                self._queue.put_nowait(item)
                return
            except queue.Full:
                # Wait in a thread (bounded, so a failed upload is noticed above) while the store catches up.
                with contextlib.suppress(queue.Full):
                    await asyncio.to_thread(self._queue.put, item, True, 0.5)
                    return

    async def finish(self) -> None:
        await self.flush_pending()
        await self._hand_over(_EOF)
        await self._task

    async def abort(self) -> None:
        self._pending.clear()
        if not self._task.done():
            with contextlib.suppress(Exception):
                await self._hand_over(UploadAborted())
        with contextlib.suppress(Exception):
            await self._task
        with contextlib.suppress(Exception):
            await self.blobs.delete(self.key)

    # -- the worker thread side (minio reads parts from here) ---------------------------------------
    def readable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> bytes:
        want = -1 if size is None else size
        while not self._eof and (want < 0 or len(self._buffer) < want):
            item = self._queue.get()
            if isinstance(item, BaseException):
                raise item
            if item == _EOF:
                self._eof = True
                break
            self._buffer += item
        n = len(self._buffer) if want < 0 else min(want, len(self._buffer))
        out = bytes(self._buffer[:n])
        del self._buffer[:n]
        return out
