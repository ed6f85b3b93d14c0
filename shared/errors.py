"""Domain errors: the only way a rule says no. The bus and the gateway turn them into the envelope."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# HTTP status for every error code of the API (docs/api.md).
HTTP_STATUS: dict[str, int] = {
    "unauthenticated": 401,
    "invalid": 422,
    "forbidden": 403,
    "not_found": 404,
    "conflict": 409,
    "unavailable": 409,
    "too_large": 413,
    "unsupported": 415,
    "rate_limited": 429,
    "overloaded": 503,
    "internal": 500,
    "timeout": 504,
}


class DomainError(Exception):
    code = "internal"

    def __init__(self, message: str, details: dict[str, Any] | None = None, *, code: str | None = None):
        super().__init__(message)
        if code is not None:
            self.code = code
        if self.code not in HTTP_STATUS:
            raise ValueError(f"unknown error code {self.code!r}")
        self.message = message
        self.details = details or {}

    def envelope(self) -> dict[str, Any]:
        return {"error": {"code": self.code, "message": self.message, "details": self.details}}


class Unauthenticated(DomainError):
    code = "unauthenticated"


class Forbidden(DomainError):
    """No valid proof of the caller (shared/proof.py), or a run-bound call without the run's lease token."""

    code = "forbidden"


class Invalid(DomainError):
    code = "invalid"


class NotFound(DomainError):
    code = "not_found"


class Conflict(DomainError):
    code = "conflict"


class Unavailable(DomainError):
    code = "unavailable"

    def __init__(self, message: str, details: dict[str, Any] | None = None, *, reason: str | None = None):
        merged = dict(details or {})
        if reason is not None:
            merged["reason"] = reason
        super().__init__(message, merged)
        self.reason = str(merged.get("reason", "unavailable"))


class TooLarge(DomainError):
    code = "too_large"


class Unsupported(DomainError):
    code = "unsupported"


class RateLimited(DomainError):
    """Over the per-token request rate; `retry_after` is the whole seconds until the next request fits."""

    code = "rate_limited"

    def __init__(self, message: str, *, retry_after: int):
        super().__init__(message, {"retry_after": retry_after})
        self.retry_after = retry_after


class Overloaded(DomainError):
    code = "overloaded"


class Timeout(DomainError):
    code = "timeout"


# The answer to a request whose service lost its database session under it (`shared.db.session_lost`): as
# with no answer in time, what the request did is not known.
LOST_SESSION = "the service lost its database session under the request (restarting?); its outcome is not known"


class Unreachable(Timeout):
    """The owner service did not answer on the bus (no responder, or no reply in time)."""


_BY_CODE: dict[str, type[DomainError]] = {
    cls.code: cls
    for cls in (
        Unauthenticated,
        Forbidden,
        Invalid,
        NotFound,
        Conflict,
        Unavailable,
        TooLarge,
        Unsupported,
        Overloaded,
        Timeout,
    )
}


def from_envelope(error: dict[str, Any]) -> DomainError:
    """Rebuild the typed error a remote service raised, so callers can catch `Conflict` and the like."""
    code = error.get("code", "internal")
    message, details = error.get("message", "error"), error.get("details") or {}
    cls = _BY_CODE.get(code)
    if cls is None:
        return DomainError(message, details, code="internal")
    return cls(message, details)


def over_limit(size: int, limit: int, unit: str = "characters") -> str:
    """The words of a size refusal: the size sent and the limit, so the sender can tell how far to shorten."""
    return f"too long: {size:,} {unit}, the limit is {limit:,}"


def too_long(what: str, size: int, limit: int, unit: str = "characters") -> str:
    """`the note is too long: 200,000 characters, the limit is 20,000`."""
    return f"{what} is {over_limit(size, limit, unit)}"


def _count(n: Any, one: str) -> str:
    return f"{n:,} {one}" if n == 1 else f"{n:,} {one}s"


def _length(value: Any) -> int | None:
    return len(value) if isinstance(value, str | bytes | list | tuple | dict) else None


_LENGTH_UNITS = {"string_too_long": "characters", "bytes_too_long": "bytes", "too_long": "items"}


def plain_problem(error: Mapping[str, Any]) -> str:
    """What is wrong with one field, in words a person reads (one error of pydantic's `errors()`): the limit
    a value broke and the size it had, rather than the validator's phrasing."""
    kind, ctx, given = error.get("type", ""), error.get("ctx") or {}, error.get("input")
    size = _length(given)
    if kind == "missing":
        return "is required"
    if kind == "extra_forbidden":
        return "is not a field this request takes"
    if kind == "string_too_short":
        least = ctx.get("min_length", 1)
        return "must not be empty" if least == 1 else f"must be at least {_count(least, 'character')}"
    if kind in _LENGTH_UNITS and isinstance(ctx.get("max_length"), int):
        # The size sent beside the bound (pydantic names only the bound of a string).
        sent = ctx.get("actual_length", size)
        return over_limit(sent, ctx["max_length"], _LENGTH_UNITS[kind]) if isinstance(sent, int) else "is too long"
    if kind == "too_short":
        return f"must hold at least {_count(ctx.get('min_length'), 'item')}"
    if kind == "string_pattern_mismatch":
        return f"is not in the expected form (the pattern {ctx.get('pattern')})"
    bounds = {"greater_than_equal": "at least", "less_than_equal": "at most", "greater_than": "more than"}
    bounds |= {"less_than": "less than"}
    if kind in bounds:
        return f"must be {bounds[kind]} {next(iter(ctx.values()), '')}"
    if kind in ("int_parsing", "int_type", "int_from_float"):
        return "must be a whole number"
    if kind in ("float_parsing", "float_type"):
        return "must be a number"
    if kind in ("bool_parsing", "bool_type"):
        return "must be true or false"
    if kind in ("literal_error", "enum"):
        return f"must be one of {ctx.get('expected')}"
    if kind in ("string_type", "list_type", "dict_type", "model_type"):
        return "has the wrong type: " + str(error.get("msg", "")).lower().removeprefix("input should be ")
    return str(error.get("msg", "is not valid"))
