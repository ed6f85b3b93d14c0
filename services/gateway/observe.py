"""The gateway's edge of observability: `X-Request-ID` in and out, and HTTP metrics per route."""

from __future__ import annotations

import hmac
import logging
import time
from typing import Any

from fastapi import APIRouter, Depends, Request, Security
from fastapi.responses import Response
from fastapi.security import HTTPAuthorizationCredentials
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from services.gateway.deps import BEARER
from services.gateway.openapi import errors
from services.gateway.tokens import bearer
from shared.errors import Unauthenticated
from shared.metrics import HTTP_REQUESTS, HTTP_SECONDS, process_registry
from shared.observe import acceptable_request_id, bound, new_request_id
from shared.restarts import RestartsCollector
from shared.settings import GatewaySettings

HEADER = b"x-request-id"
log = logging.getLogger("dossier.gateway.access")


class RequestIdAndMetrics:
    """Pure ASGI (no BaseHTTPMiddleware task hop): the id is bound for the whole request, in its task."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = next((v.decode("latin-1") for k, v in scope["headers"] if k == HEADER), None)
        request_id = given if given is not None and acceptable_request_id(given) else new_request_id()
        status = 500
        started = time.perf_counter()

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message["headers"] = [*message.get("headers", []), (HEADER, request_id.encode())]
            await send(message)

        try:
            with bound(request_id=request_id):
                await self.app(scope, receive, send_with_id)
        finally:
            elapsed = time.perf_counter() - started
            template = route_template(scope)
            method = scope["method"]
            HTTP_REQUESTS.labels(method, template, str(status)).inc()
            HTTP_SECONDS.labels(method, template).observe(elapsed)
            log.info("%s %s %d %.1fms", method, scope["path"], status, elapsed * 1000, extra={"request_id": request_id})


def route_template(scope: Scope) -> str:
    """The route a request was for, as a template: the one FastAPI matched, else (a request answered before
    routing, such as a 401 or a 413, or a route outside FastAPI's, such as /mcp) the first whose path
    matches, so a metric's `route` stays bounded and says where the traffic went."""
    matched = getattr(scope.get("route"), "path", None)
    if matched:
        return str(matched)
    return _first_match(getattr(getattr(scope.get("app"), "router", None), "routes", ()), scope) or "unmatched"


def _first_match(routes: Any, scope: Scope) -> str | None:
    for route in routes:
        match, _ = route.matches(scope)
        if match is Match.NONE:
            continue
        path = getattr(route, "path", None)
        if path is not None:
            return str(path)
        # An included router (FastAPI keeps it whole): its own routes carry the paths.
        found = _first_match(getattr(getattr(route, "original_router", None), "routes", ()), scope)
        if found is not None:
            return found
    return None


router = APIRouter(tags=["operations"])


def metrics_registry(settings: GatewaySettings) -> CollectorRegistry:
    """This gateway's figures (all its workers', in multiprocess mode) and the local supervisor's restart counts."""
    registry = process_registry("gateway")
    registry.register(RestartsCollector(settings.restarts_file))
    return registry


async def require_scraper(request: Request, _: HTTPAuthorizationCredentials | None = Security(BEARER)) -> None:
    """The scrapers' metrics token, as on every other process's /metrics, or the admin token."""
    settings: GatewaySettings = request.app.state.settings
    given = bearer(request.headers.get("authorization")).encode()
    accepted = [token.encode() for token in (settings.metrics_token, settings.admin_token) if token]
    # Both compared, whichever matches: the time taken says nothing about which token was close.
    if not sum(hmac.compare_digest(given, token) for token in accepted):
        raise Unauthenticated("this route needs the metrics token or the admin token")


@router.get(
    "/metrics",
    dependencies=[Depends(require_scraper)],
    response_model=None,
    responses={
        200: {"content": {CONTENT_TYPE_LATEST: {"schema": {"type": "string"}}}, "description": "Prometheus text"},
        **errors(401, 500),
    },
)
async def metrics(request: Request) -> Response:
    """Prometheus metrics of this gateway (the metrics token, or the admin token)."""
    return Response(generate_latest(request.app.state.metrics_registry), media_type=CONTENT_TYPE_LATEST)
