"""What `/openapi.json` says beyond the routes themselves: the error envelope per status, operation ids."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi.routing import APIRoute
from pydantic import BaseModel

from shared.contracts.common import ErrorEnvelope

DESCRIPTIONS = {
    401: "No token, an unknown, expired or revoked token, or the admin token outside /v1/admin",
    403: "A run-bound call without the run's lease token (X-Run-Lease)",
    404: "Not found, or it belongs to another scope",
    409: "A version conflict (CAS), a reused request id, an archived workspace, or material that is unavailable",
    413: "Over a configured limit",
    415: "A file type that is not supported",
    422: "The body, a field, a query parameter or a file is malformed",
    408: "The request's headers or body did not arrive in time (code `timeout`); the connection is closed",
    429: "This token is over its request rate (code `rate_limited`); `Retry-After` says when to come back",
    500: "A fault on the server side",
    504: "A service did not answer in time",
}
# Every /v1 route but health can answer these (given to each router); a route names the others it can answer.
COMMON = (401, 408, 422, 429, 500, 504)
RETRY_AFTER = {"Retry-After": {"description": "Whole seconds until a request fits", "schema": {"type": "integer"}}}


def errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    return {
        s: {"model": ErrorEnvelope, "description": DESCRIPTIONS[s], **({"headers": RETRY_AFTER} if s == 429 else {})}
        for s in statuses
    }


def multipart_body(model: type[BaseModel], fields: tuple[str, ...], required: tuple[str, ...]) -> dict[str, Any]:
    """`openapi_extra` for a route that reads its multipart body itself: a streamed `file` plus `fields`, each
    described as the contract model that receives it describes it, and no other field (the route refuses any)."""
    described = model.model_json_schema()["properties"]
    # An empty file is refused: the part holds at least one byte.
    properties: dict[str, Any] = {"file": {"type": "string", "format": "binary", "minLength": 1}}
    for name in fields:
        # A form field is left out, never null: an optional field's schema is its non-null branch.
        options = [s for s in described[name].get("anyOf", [described[name]]) if s.get("type") != "null"]
        properties[name] = {k: v for k, v in options[0].items() if k not in ("default", "title")}
    schema = {
        "type": "object",
        "required": ["file", *required],
        "properties": properties,
        "additionalProperties": False,
    }
    return {"requestBody": {"required": True, "content": {"multipart/form-data": {"schema": schema}}}}


def operation_id(route: APIRoute) -> str:
    """The handler's own name: `start_run`, `read_publication_version`. Names are unique across routers."""
    return route.name


def install_openapi(app: FastAPI) -> None:
    """FastAPI's document, minus the empty JSON body it adds beside a route's own text or HTML body."""

    def build() -> dict[str, Any]:
        if app.openapi_schema is None:
            spec = get_openapi(
                title=app.title,
                version=app.version,
                description=app.description,
                routes=app.routes,
            )
            for ops in spec["paths"].values():
                for op in ops.values():
                    for status, response in op["responses"].items():
                        content = response.get("content", {})
                        if (
                            status.startswith("2")
                            and len(content) > 1
                            and content.get("application/json") == {"schema": {}}
                        ):
                            del content["application/json"]
            app.openapi_schema = spec
        return app.openapi_schema

    app.openapi = build  # type: ignore[method-assign]
