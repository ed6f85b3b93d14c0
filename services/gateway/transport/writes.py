"""One socket write per response where uvicorn makes two.

uvicorn writes a response's status line and headers as soon as the app starts the response, and its body
in a second write, so every small answer costs two send syscalls (in the profile of issue 14, 22% of the
gateway's own samples were those two writes). `CombinedWrites` gives uvicorn's protocol a transport that
holds what is written during one turn of the event loop and sends it in one write at the end of that
turn: the same bytes in the same order, a moment later. More than `FLUSH_BYTES` held goes out at once, so
a large body is never held and uvicorn's flow control sees the real transport's buffer.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

FLUSH_BYTES = 64 * 1024


class HeldWrites:
    """The part of a transport uvicorn's protocol uses, with writes held until the loop's turn ends."""

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop):
        self._transport = transport
        self._loop = loop
        self._held: list[bytes] = []
        self._size = 0

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not data:
            return
        if not self._held:
            self._loop.call_soon(self.flush)
        self._held.append(bytes(data))
        self._size += len(data)
        if self._size >= FLUSH_BYTES:
            self.flush()

    def writelines(self, lines: Any) -> None:
        for data in lines:
            self.write(data)

    def flush(self) -> None:
        if self._held:
            data = self._held[0] if len(self._held) == 1 else b"".join(self._held)
            self._held.clear()
            self._size = 0
            self._transport.write(data)

    def get_write_buffer_size(self) -> int:
        return self._size + self._transport.get_write_buffer_size()

    def write_eof(self) -> None:
        self.flush()
        self._transport.write_eof()

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def abort(self) -> None:
        self._held.clear()
        self._size = 0
        self._transport.abort()

    def __getattr__(self, name: str) -> Any:
        # Reading control, is_closing, get_extra_info and the rest are the real transport's.
        return getattr(self._transport, name)


class CombinedWrites(HttpToolsProtocol):
    """uvicorn's httptools protocol on a transport that sends each loop turn's writes together."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(HeldWrites(transport, self.loop))  # type: ignore[arg-type]
