"""Run grants: signature, expiry, scope and ref are all checked; nothing is inherited."""

from __future__ import annotations

import time

import pytest
from nacl.signing import SigningKey

from shared.contracts.common import Ref
from shared.errors import NotFound, Unauthenticated
from shared.grants import GrantClaims, require_ref, sign_grant, verify_grant

KEY = SigningKey.generate()
PUBLIC = KEY.verify_key
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
    token = sign_grant(KEY, claims())
    verified = verify_grant(PUBLIC, token, scope="acme")
    assert verified.run_id == "run_1"
    require_ref(verified, A1)


def test_forged_signature_is_refused() -> None:
    token = sign_grant(SigningKey.generate(), claims())
    with pytest.raises(Unauthenticated):
        verify_grant(PUBLIC, token, scope="acme")


def test_tampered_claims_are_refused() -> None:
    payload, mac = sign_grant(KEY, claims()).split(".")
    other_payload = sign_grant(KEY, claims(refs=["publication:pub_b@1"])).split(".")[0]
    with pytest.raises(Unauthenticated):
        verify_grant(PUBLIC, f"{other_payload}.{mac}", scope="acme")
    assert payload != other_payload


def test_expired_grant_is_refused() -> None:
    token = sign_grant(KEY, claims(expires_at=time.time() - 1))
    with pytest.raises(Unauthenticated):
        verify_grant(PUBLIC, token, scope="acme")


def test_grant_of_another_scope_is_not_found() -> None:
    token = sign_grant(KEY, claims(scope="other"))
    with pytest.raises(NotFound):
        verify_grant(PUBLIC, token, scope="acme")


@pytest.mark.parametrize("token", ["", "abc", "a.b.c", "!!!.???"])
def test_malformed_grant_is_refused(token: str) -> None:
    with pytest.raises(Unauthenticated):
        verify_grant(PUBLIC, token, scope="acme")


def test_ref_outside_the_grant_is_not_found() -> None:
    verified = verify_grant(PUBLIC, sign_grant(KEY, claims()), scope="acme")
    with pytest.raises(NotFound):
        require_ref(verified, Ref(kind="publication", id="pub_a", version=2))


def test_a_service_without_the_public_key_verifies_nothing() -> None:
    with pytest.raises(Unauthenticated):
        verify_grant(None, sign_grant(KEY, claims()), scope="acme")


def test_a_verified_grant_still_expires() -> None:
    """The signature is checked once per token; the expiry on every read."""
    token = sign_grant(KEY, claims(expires_at=time.time() + 60))
    verify_grant(PUBLIC, token, scope="acme")
    with pytest.raises(Unauthenticated):
        verify_grant(PUBLIC, token, scope="acme", now=time.time() + 61)
