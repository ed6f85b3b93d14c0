"""The workbench's session cookie is not the API token, signing out ends it, a token holds a bounded number
of sessions, and a forged upload is refused before its file is read; against a real gateway process."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from services.gateway.sessions import SESSIONS_PER_TOKEN
from tests.support.api import gateway_client
from tests.support.gateway import Gateway, csrf_of, running_gateway, sign_in
from tests.support.infra import Infra


@pytest.fixture
def gateway(infra: Infra, tmp_path: Path) -> Iterator[Gateway]:
    with running_gateway(infra, tmp_path, DOSSIER_REQUEST_TIMEOUT="1") as running:
        yield running


def test_the_cookie_is_not_the_token_and_signing_out_ends_it(gateway: Gateway) -> None:
    token = gateway.token()
    with gateway_client(base_url=gateway.url, timeout=30) as browser:
        session = sign_in(browser, token)
        assert session != token and token not in session
        page = browser.get("/import")
        assert page.status_code == 200
        r = browser.post("/signout", data={"csrf": csrf_of(page)})
        assert r.status_code == 303

    # The cookie as it was before sign-out, kept by whoever copied it: it opens nothing now.
    with gateway_client(base_url=gateway.url, timeout=30, cookies={"dossier_session": session}) as thief:
        r = thief.get("/import")
        assert r.status_code == 303 and r.headers["location"].startswith("/signin")
    # Nor is it a bearer token on the API.
    r = httpx.get(f"{gateway.url}/v1/workspaces", headers={"Authorization": f"Bearer {session}"})
    assert r.status_code == 401


def test_an_upload_without_its_csrf_token_is_refused_before_its_file_is_read(gateway: Gateway) -> None:
    with gateway_client(base_url=gateway.url, timeout=30) as browser:
        session = sign_in(browser, gateway.token())
        upload_csrf = csrf_of(browser.get("/import"))
    for address in ("/upload", "/upload?csrf=forged"):
        sock = socket.create_connection(("127.0.0.1", gateway.port), timeout=30)
        try:
            # The headers of a 50 MB upload, and not a byte of its body: only a refusal can answer it.
            sock.sendall(
                f"POST {address} HTTP/1.1\r\nHost: x\r\nCookie: dossier_session={session}\r\n"
                "Content-Type: multipart/form-data; boundary=b\r\nContent-Length: 50000000\r\n\r\n".encode()
            )
            reply = sock.recv(65536)
        finally:
            sock.close()
        assert reply.startswith(b"HTTP/1.1 403"), reply[:300]
    # With its token, the same upload gets past the check (and on to the file, which is then read).
    files = {"file": ("a.txt", b"a note", "text/plain")}
    with gateway_client(base_url=gateway.url, timeout=30, cookies={"dossier_session": session}) as browser:
        r = browser.post(f"/upload?csrf={upload_csrf}", data={"source_id": "a"}, files=files)
    assert r.status_code != 403, r.text[:300]


def test_a_token_holds_a_bounded_number_of_sessions_the_oldest_ended_first(gateway: Gateway) -> None:
    token, other = gateway.token(), gateway.token(principal="bob")
    with gateway_client(base_url=gateway.url, timeout=30) as browser:
        theirs = sign_in(browser, other)
    sessions = []
    for _ in range(SESSIONS_PER_TOKEN + 2):
        with gateway_client(base_url=gateway.url, timeout=30) as browser:
            sessions.append(sign_in(browser, token))

    def opens(session: str) -> bool:
        with gateway_client(base_url=gateway.url, timeout=30, cookies={"dossier_session": session}) as browser:
            r = browser.get("/import")
        assert r.status_code in (200, 303), r.text[:300]
        return r.status_code == 200

    assert [opens(s) for s in sessions] == [False, False] + [True] * SESSIONS_PER_TOKEN
    assert opens(theirs), "another token's sessions are its own"


def test_a_session_cookie_in_a_later_cookie_header_is_read(gateway: Gateway) -> None:
    """A browser on HTTP/2 may send its cookies in pieces; a proxy in front can pass them on as several
    Cookie headers, and the session's may be any of them: they are not refused as a doubled header is
    (services.gateway.transport.limits), and Starlette reads them all."""
    with gateway_client(base_url=gateway.url, timeout=30) as browser:
        session = sign_in(browser, gateway.token())
    for pieces in (["theme=dark", f"dossier_session={session}"], [f"dossier_session={session}", "theme=dark"]):
        cookies = "".join(f"Cookie: {piece}\r\n" for piece in pieces)
        with socket.create_connection(("127.0.0.1", gateway.port), timeout=30) as sock:
            sock.sendall(f"GET /import HTTP/1.1\r\nHost: x\r\n{cookies}Connection: close\r\n\r\n".encode())
            reply = sock.recv(65536)
        assert reply.startswith(b"HTTP/1.1 200"), reply[:300]
