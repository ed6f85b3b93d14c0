"""services.gateway.transport.writes: a loop turn's writes leave in one send, in order, and large ones at once."""

from __future__ import annotations

import asyncio
from typing import Any

from services.gateway.transport.writes import FLUSH_BYTES, HeldWrites


class Socket:
    """Records what reaches the real transport."""

    def __init__(self) -> None:
        self.sent: list[bytes] = []
        self.events: list[str] = []

    def write(self, data: bytes) -> None:
        self.sent.append(data)

    def get_write_buffer_size(self) -> int:
        return 0

    def close(self) -> None:
        self.events.append("close")

    def abort(self) -> None:
        self.events.append("abort")

    def write_eof(self) -> None:
        self.events.append("eof")

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 5)}.get(name, default)


def held() -> tuple[HeldWrites, Socket]:
    socket = Socket()
    return HeldWrites(socket, asyncio.get_running_loop()), socket  # type: ignore[arg-type]


async def test_headers_and_body_written_in_one_turn_leave_in_one_send() -> None:
    transport, socket = held()
    transport.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n")
    transport.write(b"{}")
    assert socket.sent == [] and transport.get_write_buffer_size() == 40
    await asyncio.sleep(0)
    assert socket.sent == [b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}"]
    transport.write(b"next")
    await asyncio.sleep(0)
    assert socket.sent[1:] == [b"next"], "a later turn's write leaves in its own send"


async def test_a_large_write_leaves_at_once_so_nothing_big_is_held() -> None:
    transport, socket = held()
    transport.write(b"h")
    transport.write(b"x" * FLUSH_BYTES)
    assert socket.sent == [b"h" + b"x" * FLUSH_BYTES]
    assert transport.get_write_buffer_size() == 0


async def test_close_and_eof_send_what_is_held_first_and_abort_drops_it() -> None:
    transport, socket = held()
    transport.writelines([b"a", b"b"])
    transport.close()
    assert socket.sent == [b"ab"] and socket.events == ["close"]
    transport.write(b"c")
    transport.write_eof()
    assert socket.sent == [b"ab", b"c"] and socket.events == ["close", "eof"]
    transport.write(b"lost")
    transport.abort()
    await asyncio.sleep(0)
    assert socket.sent == [b"ab", b"c"] and socket.events[-1] == "abort"


async def test_everything_else_is_the_real_transports() -> None:
    transport, socket = held()
    assert transport.get_extra_info("peername") == ("127.0.0.1", 5)
    transport.write(b"")
    await asyncio.sleep(0)
    assert socket.sent == [], "an empty write sends nothing"
