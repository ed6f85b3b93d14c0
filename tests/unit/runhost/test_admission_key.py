"""What an admission's request_id stands for across releases (services/runhost/admission_key.py)."""

from __future__ import annotations

import hashlib
import json

from pydantic import Field

from services.runhost.admission_key import FIRST_LIMIT_FIELDS, admission_digest, first_digest, same_request
from shared.contracts import runhost as c

# Fields of an admission that the releases writing every field into the digest did not have yet.
ADDED_SINCE = {"agent"}


def stored_by_earlier_release(req: c.AdmitRequest, model: str) -> str:
    """The digest the earlier releases wrote: every field they knew, defaults included, the policy resolved
    (their limits had the first three fields; `max_model_requests` came later)."""
    dump = req.model_dump(mode="json", exclude=ADDED_SINCE)
    if dump["limits"] is not None:
        dump["limits"] = {name: dump["limits"][name] for name in FIRST_LIMIT_FIELDS}
    return hashlib.sha256(json.dumps(dump | {"model": model}, sort_keys=True).encode()).hexdigest()


class LaterLimits(c.RunLimits):
    max_tokens: int | None = None


class LaterAdmitRequest(c.AdmitRequest):
    """An admission as a later release might take it: a field more, and a limit more."""

    priority: int = Field(default=0)
    limits: LaterLimits | None = None


ASK = {"workspace_id": "ws_1", "question": "Is Fund X liquid?", "request_id": "req-1"}


def test_a_run_of_an_earlier_release_is_found_again() -> None:
    for extra in ({}, {"limits": {"max_steps": 5}}, {"history": [{"publication_id": "pub_a", "version": 2}]}):
        req = c.AdmitRequest.model_validate(ASK | extra)
        assert first_digest(req, "extractive") == stored_by_earlier_release(req, "extractive")
        assert same_request(stored_by_earlier_release(req, "extractive"), req, "extractive")


def test_a_field_added_later_at_its_default_changes_nothing() -> None:
    now = c.AdmitRequest.model_validate(ASK | {"limits": {"max_steps": 5}})
    later = LaterAdmitRequest.model_validate(ASK | {"limits": {"max_steps": 5}})
    assert admission_digest(later, "extractive") == admission_digest(now, "extractive")
    # A run this release stored, and one an earlier release stored, are both the same run to a later release.
    assert same_request(admission_digest(now, "extractive"), later, "extractive")
    assert same_request(stored_by_earlier_release(now, "extractive"), later, "extractive")


def test_a_field_added_later_and_set_asks_something_else() -> None:
    now = c.AdmitRequest.model_validate(ASK)
    for changed in ({"priority": 3}, {"limits": {"max_model_requests": 9}}, {"limits": {"max_tokens": 9}}):
        later = LaterAdmitRequest.model_validate(ASK | changed)
        assert first_digest(later, "extractive") is None
        assert not same_request(admission_digest(now, "extractive"), later, "extractive")
        assert not same_request(stored_by_earlier_release(now, "extractive"), later, "extractive")


def test_another_question_or_policy_is_another_request() -> None:
    req = c.AdmitRequest.model_validate(ASK)
    other = c.AdmitRequest.model_validate(ASK | {"question": "Is Fund Y liquid?"})
    for stored in (admission_digest(req, "extractive"), stored_by_earlier_release(req, "extractive")):
        assert same_request(stored, req, "extractive")
        assert not same_request(stored, other, "extractive")
        assert not same_request(stored, req, "openai")
