from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse

from services.gateway.deps import require_admin
from services.gateway.openapi import errors
from shared.contracts.common import Actor, Model

router = APIRouter(prefix="/v1/admin", dependencies=[Depends(require_admin)], tags=["admin"])


class IssuedToken(Model):
    """A new token; the secret is shown once."""

    token: str
    scope: str
    principal: str


@router.post("/tokens", status_code=201, response_model=IssuedToken, responses=errors(413))
async def issue_token(body: Actor, request: Request) -> JSONResponse:
    """Issue a token for a scope and principal (admin token)."""
    token = await request.app.state.tokens.issue(body)
    return JSONResponse({"token": token, "scope": body.scope, "principal": body.principal}, status_code=201)
