"""Run grants: signature, expiry, scope and ref are all checked; nothing is inherited."""

from __future__ import annotations

import time

import pytest

from shared.contracts.common import Ref
from shared.errors import NotFound, Unauthenticated
from shared.grants import GrantClaims, require_ref, sign_grant, verify_grant

SECRET = "bus-secret-for-tests"
A1 = Ref(kind="publication", id="pub_a", version=1)


def claims(**overrides: object) -> GrantClaims:
    values: dict[str, object] = {
        "run_id": "run_1",
        "scope": "acme",
        "refs": [A1.key()],
        "expires_at": time.time() + 60,
    }
    values.update(overrides)
    return GrantClaims.model_validate(values)


def test_valid_grant_round_trips() -> None:
    token = sign_grant(SECRET, claims())
    verified = verify_grant(SECRET, token, scope="acme")
    assert verified.run_id == "run_1"
    require_ref(verified, A1)


def test_forged_signature_is_refused() -> None:
    token = sign_grant("another-secret", claims())
    with pytest.raises(Unauthenticated):
        verify_grant(SECRET, token, scope="acme")


def test_tampered_claims_are_refused() -> None:
    payload, mac = sign_grant(SECRET, claims()).split(".")
    other_payload = sign_grant(SECRET, claims(refs=["publication:pub_b@1"])).split(".")[0]
    with pytest.raises(Unauthenticated):
        verify_grant(SECRET, f"{other_payload}.{mac}", scope="acme")
    assert payload != other_payload


def test_expired_grant_is_refused() -> None:
    token = sign_grant(SECRET, claims(expires_at=time.time() - 1))
    with pytest.raises(Unauthenticated):
        verify_grant(SECRET, token, scope="acme")


def test_grant_of_another_scope_is_not_found() -> None:
    token = sign_grant(SECRET, claims(scope="other"))
    with pytest.raises(NotFound):
        verify_grant(SECRET, token, scope="acme")


@pytest.mark.parametrize("token", ["", "abc", "a.b.c", "!!!.???"])
def test_malformed_grant_is_refused(token: str) -> None:
    with pytest.raises(Unauthenticated):
        verify_grant(SECRET, token, scope="acme")


def test_ref_outside_the_grant_is_not_found() -> None:
    verified = verify_grant(SECRET, sign_grant(SECRET, claims()), scope="acme")
    with pytest.raises(NotFound):
        require_ref(verified, Ref(kind="publication", id="pub_a", version=2))


def test_empty_secret_cannot_sign() -> None:
    with pytest.raises(ValueError):
        sign_grant("", claims())
