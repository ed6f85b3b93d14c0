"""HTTP contract of the gateway's own data: API tokens (docs/api.md). Never on the bus."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import Field, Strict

from shared.contracts.common import SCOPE_PATTERN, Integral, Model

# Ten years: long enough for any service account, short enough that a typo cannot mean "forever".
MAX_EXPIRES_IN = 10 * 365 * 24 * 3600
PAGE_DEFAULT = 100
PAGE_MAX = 500


class IssueTokenRequest(Model):
    scope: str = Field(pattern=SCOPE_PATTERN)
    principal: str = Field(min_length=1, max_length=200)
    expires_in: Annotated[int, Strict(), Field(ge=1, le=MAX_EXPIRES_IN), Integral] | None = Field(
        default=None, description="seconds until it expires"
    )


class IssuedToken(Model):
    """The answer to issuing a token: the only time its secret is shown."""

    id: str
    token: str
    scope: str
    principal: str
    expires_at: datetime | None


class TokenInfo(Model):
    id: str
    scope: str
    principal: str
    expires_at: datetime | None
    created_at: datetime


class TokenPage(Model):
    items: list[TokenInfo]
    next_cursor: str | None


# The longest a hold may last: a backup's copy of the databases takes seconds; a hold never outlives a
# backup that died by more than this.
MAX_HOLD_SECONDS = 300


class HoldWritesRequest(Model):
    seconds: Annotated[int, Strict(), Field(ge=1, le=MAX_HOLD_SECONDS), Integral] = Field(
        description="how long writes wait at most; the hold ends sooner when released"
    )


class WriteHoldState(Model):
    """Whether this gateway process holds writes, and for how much longer."""

    held: bool
    seconds_left: float
    processes: int = Field(description="gateway processes that said they hold (0 when released)")
