"""The e2e tests' HTTP client asks a read once more when a kept-alive connection closes as it goes out."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest

from tests.support.api import ReadsAgain

ANSWER = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Type: text/plain\r\n\r\nok"


@contextmanager
def closing_server() -> Iterator[tuple[str, list[int]]]:
    """Answers the first request of each connection and closes it at the second without an answer, as a
    server does to a connection it let go the moment the client reused it. Yields its URL and the count of
    requests each connection read."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    seen: list[int] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                count = 0
                while conn.recv(65536):
                    count += 1
                    if count == 2:
                        # A clean close: what the client sent after the head (a POST's body) read first,
                        # or the kernel answers it with a reset rather than the close this is about.
                        conn.shutdown(socket.SHUT_WR)
                        while conn.recv(65536):
                            pass
                        break
                    conn.sendall(ANSWER)
                seen.append(count)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}", seen
    finally:
        listener.shutdown(socket.SHUT_RDWR)  # wakes the accept (a close alone does not)
        listener.close()
        thread.join(5)


def test_a_read_on_a_connection_closed_as_it_went_out_is_asked_again() -> None:
    with closing_server() as (url, seen), httpx.Client(base_url=url, transport=ReadsAgain()) as client:
        assert client.get("/a").text == "ok"
        assert client.get("/b").text == "ok"  # the kept connection closes under it; a new one answers
        assert seen[:1] == [2]


def test_a_write_is_never_sent_twice() -> None:
    with closing_server() as (url, _), httpx.Client(base_url=url, transport=ReadsAgain()) as client:
        assert client.get("/a").text == "ok"
        with pytest.raises(httpx.RemoteProtocolError):
            client.post("/b", content=b"x")


def test_without_it_the_read_fails() -> None:
    """What the transport is for: httpx alone raises."""
    with closing_server() as (url, _), httpx.Client(base_url=url) as client:
        assert client.get("/a").text == "ok"
        with pytest.raises(httpx.RemoteProtocolError):
            client.get("/b")
