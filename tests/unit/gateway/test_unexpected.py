"""What the gateway answers when a route raises what no rule says: a lost database session is not known
to have done nothing (504 `timeout`); anything else is 500 `internal`, saying nothing of the server."""

from __future__ import annotations

import asyncpg
from fastapi import FastAPI, Request, Response
from fastapi.testclient import TestClient

from services.gateway.errors import install_error_handlers
from shared.errors import LOST_SESSION


def app() -> FastAPI:
    made = FastAPI()

    def stray(_: Request, code: str, message: str) -> Response:
        return Response(f"{code}: {message}", status_code=404)

    install_error_handlers(made, api_prefixes=("/v1/",), stray_page=stray)

    @made.get("/v1/lost")
    async def lost() -> None:
        raise asyncpg.ConnectionDoesNotExistError("connection was closed in the middle of operation")

    @made.get("/v1/boom")
    async def boom() -> None:
        raise RuntimeError("/secret/path/of/the/server")

    return made


def test_a_lost_session_answers_timeout() -> None:
    with TestClient(app(), raise_server_exceptions=False) as client:
        r = client.get("/v1/lost")
    assert r.status_code == 504
    assert r.json() == {"error": {"code": "timeout", "message": LOST_SESSION, "details": {}}}


def test_anything_else_answers_internal_without_leaking() -> None:
    with TestClient(app(), raise_server_exceptions=False) as client:
        r = client.get("/v1/boom")
    assert r.status_code == 500
    assert r.json()["error"]["code"] == "internal" and "/secret" not in r.text
