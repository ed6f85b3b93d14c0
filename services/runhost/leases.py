"""A run's lease, and how losing it is told.

A worker's lease and an outside agent's are the same columns of `runs` (owner, epoch, expiry): every
write under a lease is fenced by its epoch in SQL (services/runhost/repository.py), and a write the
fence refuses raises `StaleLease`. An outside agent holds its lease by a secret token, shown once
(admission, take-over) and kept only as its SHA-256, one per epoch (services/runhost/external.py); the
refusals it is answered with are built here.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime
from typing import Any

from shared.contracts import runhost as c
from shared.errors import Conflict, Forbidden

# A run stopped by one of its limits fails with this error code, its `error_details` naming the limit by its
# admission name and its value (`{limit: "max_steps", value: 400}`), as a run the run host drives does.
LIMIT_REACHED = c.LIMIT_REACHED


class StaleLease(Exception):
    """This worker's lease epoch is no longer current: another worker owns the run now."""


def new_token() -> tuple[str, str]:
    """A fresh lease token and the hash the run host keeps of it."""
    token = "rl_" + secrets.token_urlsafe(32)
    return token, token_hash(token)


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def not_the_token() -> Forbidden:
    return Forbidden("this is not the run's lease token", {"header": "X-Run-Lease"})


def not_running(status: str, error: str | None = None, error_details: dict[str, Any] | None = None) -> Conflict:
    """The run has ended; one stopped by a limit says which."""
    details: dict[str, object] = {"status": status}
    if error == LIMIT_REACHED and error_details and "limit" in error_details:
        details["limit"] = error_details["limit"]
    return Conflict("the run is not running", details)


def limit_reached(which: str, maximum: float) -> Conflict:
    """The call that would take the run over one of its limits: the run has ended `failed` with it."""
    shown = {
        "max_steps": f"{maximum:,.0f} steps",
        "max_chars": f"{maximum:,.0f} characters",
        "max_seconds": f"{maximum:g} seconds",
    }
    return Conflict(
        f"the run reached its limit of {shown[which]}; it has ended as failed ({LIMIT_REACHED})",
        {"limit": which, "status": "failed"},
    )


def limit_details(which: str, maximum: float) -> dict[str, Any]:
    """A run's `error_details` when it stopped at a limit."""
    return {"limit": which, "value": maximum}


def superseded(current_epoch: int | None) -> Conflict:
    """Another session holds a newer epoch."""
    return Conflict("another session took the run over", {"current_epoch": current_epoch})


def expired() -> Conflict:
    return Conflict("the lease has expired; take the run over to go on", {"lease": "expired"})


def held(expires_at: datetime | None) -> Conflict:
    """Another session holds the lease until `expires_at`."""
    until = expires_at.isoformat().replace("+00:00", "Z") if expires_at is not None else None
    return Conflict(
        "the lease is held; wait for it to expire or take it with force", {"lease": "held", "expires_at": until}
    )


def finishing() -> Conflict:
    """A finish won the run: its answer is kept and being published; no other call changes the run now."""
    return Conflict("a finish won the run; its answer is being published", {"lease": "finishing"})


def not_external(driver: str) -> Conflict:
    return Conflict("only a run driven by an outside agent can be taken over", {"driver": driver})
