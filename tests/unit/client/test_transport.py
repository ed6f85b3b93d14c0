"""How the client sends and reads: 429 (and 503 `overloaded`) sent again after `Retry-After`, every error
envelope raised as its kind, and when a run session renews its lease."""

from __future__ import annotations

import email.utils
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from dossier_client import Dossier, errors
from dossier_client._lease import LeaseKeeper, limit_error
from dossier_client._transport import RETRIES, retry_wait
from dossier_client.models import Lease, Run


def envelope(code: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"error": {"code": code, "message": f"a {code}", "details": details or {}}}


def client_answering(answers: list[httpx.Response], seen: list[httpx.Request]) -> Dossier:
    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return answers.pop(0)

    dossier = Dossier("http://dossier.test", "tok")
    dossier.http = httpx.Client(base_url=dossier.url, transport=httpx.MockTransport(handle))
    return dossier


def test_a_429_is_sent_again_after_its_retry_after() -> None:
    seen: list[httpx.Request] = []
    limited = httpx.Response(429, headers={"Retry-After": "0"}, json=envelope("rate_limited"))
    overloaded = httpx.Response(503, json=envelope("overloaded"))
    ok = httpx.Response(200, json={"status": "ok", "services": {}})
    dossier = client_answering([limited, overloaded, ok], seen)
    # The overloaded answer has no Retry-After: the client's own first wait, not the server's.
    assert retry_wait(overloaded, 0) == 0.5
    assert dossier.health() == {"status": "ok", "services": {}}
    assert len(seen) == 3 and len({r.url for r in seen}) == 1


def test_a_429_that_lasts_is_raised_after_the_retries() -> None:
    seen: list[httpx.Request] = []
    answers = [httpx.Response(429, headers={"Retry-After": "0"}, json=envelope("rate_limited"))] * (RETRIES + 1)
    with pytest.raises(errors.RateLimited):
        client_answering(list(answers), seen).health()
    assert len(seen) == RETRIES + 1


def test_retry_after_in_seconds_or_as_a_date() -> None:
    assert retry_wait(httpx.Response(429, headers={"Retry-After": "2"}), 0) == 2.0
    later = email.utils.format_datetime(datetime.now(UTC) + timedelta(seconds=20), usegmt=True)
    assert 15 < (retry_wait(httpx.Response(429, headers={"Retry-After": later}), 0) or 0) <= 20
    assert retry_wait(httpx.Response(503, json=envelope("internal")), 0) is None, "only `overloaded` is retried"
    assert retry_wait(httpx.Response(409, json=envelope("conflict")), 0) is None


@pytest.mark.parametrize(
    ("status", "body", "kind"),
    [
        (404, envelope("not_found"), errors.NotFound),
        (422, envelope("invalid", {"field": "q"}), errors.Invalid),
        (409, envelope("conflict", {"current_version": 2}), errors.Conflict),
        (409, envelope("conflict", {"current_epoch": 3}), errors.LeaseLost),
        (409, envelope("conflict", {"lease": "expired"}), errors.LeaseExpired),
        (409, envelope("conflict", {"limit": "steps"}), errors.LimitReached),
        (409, envelope("unavailable", {"reason": "withdrawn"}), errors.Unavailable),
        (403, envelope("forbidden"), errors.Forbidden),
        (401, envelope("unauthenticated"), errors.Unauthenticated),
        (413, envelope("too_large", {"limit": 1}), errors.TooLarge),
        (500, {"detail": "not an envelope"}, errors.DossierError),
    ],
)
def test_each_error_is_raised_as_its_kind(status: int, body: Any, kind: type[errors.DossierError]) -> None:
    error = errors.error_from(status, body)
    assert type(error) is kind and error.status == status
    if "error" in body:
        assert error.envelope() == body


def test_lease_lost_and_expired_are_conflicts() -> None:
    assert issubclass(errors.LeaseLost, errors.Conflict) and issubclass(errors.LeaseExpired, errors.Conflict)


def lease(seconds: float) -> Lease:
    return Lease(token="rl_x", epoch=1, expires_at=datetime.now(UTC) + timedelta(seconds=seconds))


def test_a_lease_is_renewed_at_a_third_and_sooner_after_a_failure() -> None:
    keeper = LeaseKeeper(lease(300))
    assert 95 < keeper.next_wait() <= 100
    assert keeper.renewal_failed(errors.Unreachable(0, "unreachable", "down"))
    assert keeper.next_wait() <= 2.0
    keeper.renewed(lease(300))
    assert keeper.next_wait() > 95


def test_a_lost_lease_stops_the_renewals_and_every_call() -> None:
    keeper = LeaseKeeper(lease(300))
    assert not keeper.renewal_failed(errors.error_from(409, envelope("conflict", {"current_epoch": 2})))
    with pytest.raises(errors.LeaseLost):
        keeper.check()
    ended = LeaseKeeper(lease(300))
    assert not ended.renewal_failed(errors.error_from(409, envelope("conflict", {"status": "completed"})))
    ended.check()  # the run ended: calls go on and get the server's own answer
    assert ended.ended


def a_run(status: str, error: str | None) -> Run:
    return Run.model_validate(
        {
            "id": "run_1",
            "workspace_id": "ws_1",
            "conversation_id": "conv_1",
            "request_id": "r",
            "status": status,
            "question": "q?",
            "model": "external",
            "goal_version": 1,
            "history": [],
            "catalog": {"items": [], "complete": True, "omitted": 0},
            "publication": None,
            "checkpoint_proposal": {"status": "none"},
            "workspace_association": "pending",
            "error": error,
            "created_at": "2026-01-01T00:00:00Z",
            "finished_at": None,
        }
    )


def test_a_conflict_of_a_run_a_limit_ended_is_that_limit() -> None:
    conflict = errors.error_from(409, envelope("conflict", {"status": "failed"}))
    assert isinstance(conflict, errors.Conflict)
    ended = a_run("failed", "limit_reached").model_copy(update={"error_details": {"limit": "max_steps", "value": 3}})
    reached = limit_error(ended, conflict)
    assert isinstance(reached, errors.LimitReached) and reached.details["limit"] == "max_steps"
    assert limit_error(a_run("completed", None), conflict) is conflict
