"""The API's error envelope (`{"error": {code, message, details}}`) as exceptions a caller can catch by kind."""

from __future__ import annotations

from typing import Any

import httpx


class DossierError(Exception):
    """Any answer of the API that is not a success: its HTTP status and the envelope's code, message, details."""

    def __init__(self, status: int, code: str, message: str, details: dict[str, Any] | None = None):
        super().__init__(f"{code} ({status}): {message}")
        self.status, self.code, self.message, self.details = status, code, message, details or {}

    def envelope(self) -> dict[str, Any]:
        return {"error": {"code": self.code, "message": self.message, "details": self.details}}


class Unauthenticated(DossierError):
    """401: no token, an unknown, expired or revoked one."""


class Forbidden(DossierError):
    """403: a run-bound call without the run's lease token."""


class NotFound(DossierError):
    """404: it does not exist, or it belongs to another scope."""


class Invalid(DossierError):
    """422: a malformed body, field or parameter (`details` names it; a finish citing unread refs: `refs`)."""


class Conflict(DossierError):
    """409 `conflict`: a version mismatch, a reused request id, an archived workspace, a run not running."""


class LeaseLost(Conflict):
    """409: another session holds the run's lease now (`details.current_epoch`), or this session's lease
    expired and another took the run over. The session can do nothing more with the run."""


class LeaseExpired(Conflict):
    """409 with `details.lease == "expired"`: the lease ran out; a take-over (by anyone) goes on."""


class Unavailable(DossierError):
    """409 `unavailable`: the material exists but cannot be used now (`details.reason`: withdrawn, retired...)."""


class LimitReached(DossierError):
    """The run is over one of its limits (steps, time, characters): it ends `failed` with `limit_reached`."""


class TooLarge(DossierError):
    """413: over a configured size limit (`details.limit`)."""


class RateLimited(DossierError):
    """429 after every retry the client allows: the token is over its request rate."""


class Unreachable(DossierError):
    """The gateway could not be reached or did not answer (no HTTP status: 0)."""


_BY_CODE: dict[str, type[DossierError]] = {
    "unauthenticated": Unauthenticated,
    "forbidden": Forbidden,
    "not_found": NotFound,
    "invalid": Invalid,
    "conflict": Conflict,
    "unavailable": Unavailable,
    "too_large": TooLarge,
    "rate_limited": RateLimited,
    "limit_reached": LimitReached,
}


def error_from(status: int, body: Any) -> DossierError:
    """The exception for one error answer: by the envelope's code and details, else by the status."""
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return DossierError(status, "http_error", f"HTTP {status}", {"body": body})
    code, message = str(error.get("code", "http_error")), str(error.get("message", ""))
    found = error.get("details")
    details: dict[str, Any] = found if isinstance(found, dict) else {}
    kind = _BY_CODE.get(code, DossierError)
    if code == "conflict" and "current_epoch" in details:
        kind = LeaseLost
    elif code == "conflict" and details.get("lease") == "expired":
        kind = LeaseExpired
    elif code in ("conflict", "invalid") and (details.get("error") == "limit_reached" or "limit" in details):
        kind = LimitReached
    return kind(status, code, message, details)


def error_of(response: httpx.Response) -> DossierError:
    try:
        body = response.json()
    except ValueError:
        body = response.text[:500]
    return error_from(response.status_code, body)
