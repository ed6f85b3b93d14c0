"""Every failure of the HTTP API leaves as the error envelope (docs/api.md)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from shared.db import session_lost
from shared.errors import HTTP_STATUS, LOST_SESSION, DomainError, Timeout, plain_problem

log = logging.getLogger("dossier.gateway")


def envelope(code: str, message: str, details: dict[str, Any] | None = None, status: int | None = None) -> JSONResponse:
    return JSONResponse(
        {"error": {"code": code, "message": message, "details": details or {}}},
        status_code=status or HTTP_STATUS[code],
    )


def allowed_methods(request: Request) -> str:
    """Every method some route serves at this path. Starlette names only the first route whose path matches,
    and a path served by two routes (`GET` and `POST /v1/workspaces`) would then lose one of them."""
    probe = {**request.scope, "method": "\0"}  # a method no route serves: a route of this path is PARTIAL
    methods: set[str] = set()
    routes: list[Any] = list(request.app.router.routes)
    while routes:
        route = routes.pop()
        # FastAPI keeps an included router as one entry that holds its routes with their full paths.
        nested = getattr(route, "effective_candidates", None)
        if nested is not None:
            routes.extend(nested())
        elif route.matches(probe)[0] is Match.PARTIAL:
            methods |= set(getattr(route, "methods", None) or ())
    return ", ".join(sorted(methods))


def _field(loc: tuple[Any, ...]) -> str:
    parts = [str(p) for p in loc if p not in ("body", "query", "path", "header")]
    return ".".join(parts) or (str(loc[0]) if loc else "body")


def _http_message(request: Request, exc: StarletteHTTPException) -> str:
    """Starlette's bare phrases ("Not Found") said as what went wrong, with the path the caller sent."""
    if exc.status_code == 404:
        return f"there is nothing at {request.url.path}: no path of the API looks like it"
    if exc.status_code == 405:
        return f"{request.method} is not a method of {request.url.path} (it takes {allowed_methods(request)})"
    return str(exc.detail)


# A page for a browser that strays off the workbench's pages (the workbench hands in its own renderer, so
# the API's error path never imports the workbench's templates).
StrayPage = Callable[[Request, str, str], Response]


def install_error_handlers(app: FastAPI, *, api_prefixes: tuple[str, ...], stray_page: StrayPage) -> None:
    @app.exception_handler(DomainError)
    async def on_domain_error(_: Request, exc: DomainError) -> JSONResponse:
        return envelope(exc.code, exc.message, exc.details)

    @app.exception_handler(RequestValidationError)
    async def on_validation_error(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors = exc.errors()
        first = errors[0] if errors else {}
        if first.get("type") == "json_invalid":
            return envelope("invalid", "the request body is not valid JSON", {"field": "body"})
        field = _field(tuple(first.get("loc", ())))
        return envelope("invalid", f"{field}: {plain_problem(first)}", {"field": field})

    @app.exception_handler(StarletteHTTPException)
    async def on_http_error(request: Request, exc: StarletteHTTPException) -> Response:
        code = "not_found" if exc.status_code == 404 else "invalid"
        if not request.url.path.startswith(api_prefixes):
            return stray_page(request, code, "there is no page here" if code == "not_found" else str(exc.detail))
        if exc.status_code == 400:
            # FastAPI's "error parsing the body" (a JSON body nested deeper than the parser goes): bad input.
            return envelope("invalid", "the request body cannot be parsed", {"field": "body"})
        response = envelope(code, _http_message(request, exc), status=exc.status_code)
        # Starlette's own headers, such as the `Allow` of a 405, are part of the answer.
        response.headers.update(exc.headers or {})
        if exc.status_code == 405:
            response.headers["Allow"] = allowed_methods(request) or response.headers.get("Allow", "")
        return response

    @app.exception_handler(Exception)
    async def on_unexpected(_: Request, exc: Exception) -> JSONResponse:
        if session_lost(exc):
            log.warning("the gateway lost its database session: %r", exc)
            return envelope(Timeout.code, LOST_SESSION)
        log.exception("unhandled error in the gateway")
        return envelope("internal", "the server failed to handle the request")
