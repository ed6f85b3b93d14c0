"""The gateway before a token is known, played by an attacker against a real gateway process.

Bodies without a token, connections that never finish their headers, a chunked body that stops: each is
bounded in memory, connections and time, and a caller with a token is still answered meanwhile.
"""

from __future__ import annotations

import asyncio
import json
import resource
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest

from tests.support.api import probe
from tests.support.gateway import Gateway, connect_from, read_if_closed, running_gateway
from tests.support.infra import Infra

FLOOD_CONNECTIONS = 400
FLOOD_BODY = 1_000_000  # under the 1 MiB JSON limit, so only authentication can refuse it
HALF_OPEN = 3000
PER_PEER = 256
TOTAL = 1000
ATTACKER = "127.0.0.2"


@pytest.fixture(autouse=True)
def enough_descriptors() -> None:
    """This test process holds thousands of sockets itself."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


class PeakMemory:
    """Samples a process's resident memory in a thread until stopped; the peak is what the flood cost."""

    def __init__(self, pid: int):
        self.process = psutil.Process(pid)
        self.before = self.process.memory_info().rss
        self.peak = self.after = self.before
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, self.process.memory_info().rss)

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        self.after = self.process.memory_info().rss
        return self.peak - self.before


async def send_unauthenticated_body(port: int, path: str) -> bytes:
    """One attacker connection: a 1 MB JSON body without a token. Returns what the gateway answered
    before it closed the connection (a refusal that leaves the body unread may end in a reset)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    head = f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {FLOOD_BODY}\r\n\r\n"
    body = memoryview(b'"' + b"x" * (FLOOD_BODY - 2) + b'"')

    async def write() -> None:
        writer.write(head.encode())
        for start in range(0, FLOOD_BODY, 65536):
            writer.write(body[start : start + 65536])
            await writer.drain()

    sending = asyncio.create_task(write())
    reply = bytearray()
    try:
        while chunk := await reader.read(65536):
            reply += chunk
    except OSError:
        pass
    finally:
        sending.cancel()
        await asyncio.gather(sending, return_exceptions=True)
        writer.close()
    return bytes(reply)


async def flood(gateway: Gateway, path: str) -> tuple[int, list[bytes], int]:
    """400 connections each sending 1 MB without a token; meanwhile a token's request. Returns the gateway's
    peak RSS growth, what each attacker connection got, and the status of the authenticated request."""
    # Warm: the first requests of a process (and of a route: its templates) allocate what later ones reuse.
    async with httpx.AsyncClient(base_url=gateway.url, timeout=60) as client:
        for _ in range(3):
            await client.get("/v1/admin/tokens", headers={"Authorization": f"Bearer {gateway.admin}"})
            await send_unauthenticated_body(gateway.port, path)
        memory = PeakMemory(gateway.pid)
        attackers = [
            asyncio.create_task(send_unauthenticated_body(gateway.port, path)) for _ in range(FLOOD_CONNECTIONS)
        ]
        await asyncio.sleep(0)  # every attacker is connecting when the caller with a token asks
        answered = await client.get("/v1/admin/tokens", headers={"Authorization": f"Bearer {gateway.admin}"})
        replies = await asyncio.gather(*attackers)
        grew = memory.stop()
    print(
        f"flood of {path}: RSS before {memory.before / 2**20:.0f} MB, peak growth {grew / 2**20:.1f} MB,"
        f" after {memory.after / 2**20:.0f} MB"
    )
    return grew, replies, answered.status_code


async def test_an_unauthenticated_flood_is_answered_without_holding_its_bodies(infra: Infra, tmp_path: Path) -> None:
    with running_gateway(infra, tmp_path, DOSSIER_MAX_CONNECTIONS_PER_PEER="1000") as gateway:
        grew, replies, status = await flood(gateway, "/v1/workspaces")
    assert status == 200, "the caller with a token was not answered during the flood"
    assert grew < 64 * 2**20, f"the gateway grew by {grew / 2**20:.0f} MB"
    refused = [r for r in replies if r.startswith(b"HTTP/1.1 401")]
    print(f"{len(refused)} of {FLOOD_CONNECTIONS} attackers read their 401 before the connection closed")
    assert refused, "no attacker connection got its 401"
    assert all(not r or r.startswith(b"HTTP/1.1 401") for r in replies)
    assert all(b"x-request-id" in r.lower() and b'"unauthenticated"' in r for r in refused)


async def test_bodies_read_before_auth_is_known_stay_within_the_budget(infra: Infra, tmp_path: Path) -> None:
    """The workbench's sign-in form is read before anyone is known: 400 bodies of 1 MB there wait for room
    in the pre-auth budget or are answered 503 `overloaded`. (A held body costs about twice its size in
    the process, with the copies a read makes: the budget here is half the default's 16 MiB, so that what
    the refusals cost besides stays in view.)"""
    with running_gateway(
        infra,
        tmp_path,
        DOSSIER_MAX_CONNECTIONS_PER_PEER="1000",
        DOSSIER_PREAUTH_BUFFER_BYTES=str(8 * 2**20),
        DOSSIER_PREAUTH_WAIT_SECONDS="0",
    ) as gateway:
        grew, replies, status = await flood(gateway, "/signin")
    assert status == 200, "the caller with a token was not answered during the flood"
    assert grew < 64 * 2**20, f"the gateway grew by {grew / 2**20:.0f} MB"
    assert all(not r or r.startswith((b"HTTP/1.1 503", b"HTTP/1.1 403")) for r in replies), "neither refused nor read"
    overloaded = [r for r in replies if r.startswith(b"HTTP/1.1 503")]
    print(f"sign-in flood: {len(overloaded)} of {FLOOD_CONNECTIONS} answered 503")
    assert overloaded and all(b'"overloaded"' in r and b"x-request-id" in r.lower() for r in overloaded)


@pytest.fixture
def half_open_gateway(infra: Infra, tmp_path: Path) -> Iterator[Gateway]:
    with running_gateway(
        infra,
        tmp_path,
        DOSSIER_HEADER_TIMEOUT_SECONDS="3",
        DOSSIER_MAX_CONNECTIONS_PER_PEER=str(PER_PEER),
        DOSSIER_MAX_CONNECTIONS=str(TOTAL),
    ) as gateway:
        yield gateway


class HalfSent:
    """Connections that send a request line and a header, never the blank line that ends the headers."""

    def __init__(self, port: int):
        self.port = port
        self.sockets: list[socket.socket] = []
        self.seen: dict[socket.socket, bytearray] = {}
        self.closed: set[socket.socket] = set()

    def open(self, source: str, count: int) -> None:
        for _ in range(count):
            sock = connect_from(source, self.port)
            self.sockets.append(sock)
            self.seen[sock] = bytearray()
            try:
                sock.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\n")
            except OSError:
                pass  # already refused

    def held(self) -> int:
        """How many the gateway still holds open (reading what it sent to those it closed)."""
        self.closed.update(s for s in self.sockets if s not in self.closed and read_if_closed(s, self.seen[s]))
        return len(self.sockets) - len(self.closed)

    def close(self) -> None:
        for sock in self.sockets:
            sock.close()


def test_thousands_of_half_sent_headers_are_refused_then_timed_out(half_open_gateway: Gateway) -> None:
    gateway = half_open_gateway
    attack = HalfSent(gateway.port)
    try:
        # One address: all but its share are closed as soon as they are accepted.
        attack.open(ATTACKER, HALF_OPEN)
        probe(lambda: attack.held() <= PER_PEER, timeout=30)
        print(f"half-open from one address: {attack.held()} of {HALF_OPEN} held, the rest refused at once")
        # Many addresses, more than the gateway holds in all: the longest waiting make room for the newest.
        for n in range(3, 3 + TOTAL // PER_PEER + 2):
            attack.open(f"127.0.0.{n}", PER_PEER)
        probe(lambda: attack.held() <= TOTAL, timeout=30)
        print(f"half-open from {TOTAL // PER_PEER + 3} addresses: {attack.held()} of {len(attack.sockets)} held")

        started = time.monotonic()
        r = httpx.get(f"{gateway.url}/v1/admin/tokens", headers={"Authorization": f"Bearer {gateway.admin}"})
        print(f"an authenticated request among them answered in {time.monotonic() - started:.3f}s")
        assert r.status_code == 200

        probe(lambda: attack.held() == 0, timeout=30)
        answered = [bytes(seen) for seen in attack.seen.values() if seen]
        assert answered, "no held connection was answered 408"
        for reply in answered:
            assert reply.startswith(b"HTTP/1.1 408"), reply[:200]
            assert b"x-request-id" in reply.lower()
            assert json.loads(reply.split(b"\r\n\r\n", 1)[1])["error"]["code"] == "timeout"
    finally:
        attack.close()


def test_a_chunked_body_that_stops_is_closed(infra: Infra, tmp_path: Path) -> None:
    with running_gateway(infra, tmp_path, DOSSIER_BODY_TIMEOUT_SECONDS="2") as gateway:
        token = gateway.token()
        sock = socket.create_connection(("127.0.0.1", gateway.port), timeout=10)
        try:
            sock.sendall(
                b"POST /v1/workspaces HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                + f"Authorization: Bearer {token}\r\n".encode()
                + b"Transfer-Encoding: chunked\r\n\r\n400\r\n{"  # promises 1 KiB, sends one byte, stops
            )
            seen = bytearray()
            probe(lambda: read_if_closed(sock, seen), timeout=30)
        finally:
            sock.close()
    assert bytes(seen).startswith(b"HTTP/1.1 408"), bytes(seen[:200])
    assert json.loads(bytes(seen).split(b"\r\n\r\n", 1)[1])["error"]["code"] == "timeout"
