"""What the blocking and the async run sessions share: the lease they hold, when to renew it, and what
an error of a run-bound call means for the session."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from dossier_client.errors import Conflict, DossierError, Forbidden, LeaseExpired, LeaseLost, LimitReached
from dossier_client.models import Lease, Run

# Renew when a third of the lease has passed, so two renewals can fail before it runs out.
RENEW_FRACTION = 1 / 3
# After a renewal that failed for a passing reason (unreachable, 5xx, 429): try again this soon, at most.
RETRY_SECONDS = 2.0
SHORTEST_WAIT = 0.2


class LeaseKeeper:
    """The lease a session holds: renewed in the background, replaced by a take-over of its own expired
    lease, and, once another session holds the run, lost for good (every call then raises that error)."""

    def __init__(self, lease: Lease):
        self.lease = lease
        self.lost: DossierError | None = None
        # The run no longer takes renewals (finished, cancelled, failed): the renewer stops, calls go on
        # and get the server's own answer.
        self.ended = False
        self._failures = 0

    def check(self) -> None:
        if self.lost is not None:
            raise self.lost

    def next_wait(self) -> float:
        remaining = (self.lease.expires_at - datetime.now(UTC)).total_seconds()
        if self._failures:
            return max(min(RETRY_SECONDS * self._failures, remaining * RENEW_FRACTION), SHORTEST_WAIT)
        return max(remaining * RENEW_FRACTION, SHORTEST_WAIT)

    def renewed(self, lease: Lease) -> None:
        self.lease, self._failures = lease, 0

    def renewal_failed(self, error: Exception) -> bool:
        """Whether to go on renewing after `error`: not once the lease is lost or the run is over."""
        if isinstance(error, LeaseLost | Forbidden):
            self.lose(error)
            return False
        if isinstance(error, Conflict) and not isinstance(error, LeaseExpired):
            self.ended = True
            return False
        self._failures += 1
        return True

    def lose(self, error: DossierError) -> LeaseLost:
        if not isinstance(error, LeaseLost):
            error = LeaseLost(error.status, error.code, f"the run's lease is lost: {error.message}", error.details)
        if self.lost is None:
            self.lost = error
        return error


def limit_error(run: Run, error: Conflict) -> DossierError:
    """A conflict of a run that a limit ended is that limit (the run failed with `limit_reached`)."""
    if run.status == "failed" and run.error == "limit_reached":
        limit = (run.error_details or {}).get("limit")
        details: dict[str, Any] = error.details | {"limit": limit, "run_error": run.error}
        return LimitReached(error.status, "limit_reached", f"the run ended at its limit {limit}", details)
    return error
