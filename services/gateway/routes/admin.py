from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse

from services.gateway.deps import require_admin
from shared.contracts.common import Actor

router = APIRouter(prefix="/v1/admin", dependencies=[Depends(require_admin)])


@router.post("/tokens", status_code=201)
async def issue_token(body: Actor, request: Request) -> JSONResponse:
    token = await request.app.state.tokens.issue(body)
    return JSONResponse({"token": token, "scope": body.scope, "principal": body.principal}, status_code=201)
