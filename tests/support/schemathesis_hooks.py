"""A correction to schemathesis, loaded into its CLI by tests/e2e/test_schemathesis.py (SCHEMATHESIS_HOOKS).

To break one value of a valid multipart body, schemathesis checks that the broken body really violates the
document; before that check it stands an empty string in for every binary part. The gateway's document says
an uploaded file holds at least one byte (`minLength: 1`), so that stand-in alone fails the check, and a body
whose broken value is still valid (a `source_id` with `*` appended) is sent as invalid data: the gateway
accepts it, rightly, and the fuzzer reports "schema-violating request accepted". Here the stand-in is a string
as long as the part's bytes, so the check judges the value that was actually broken.
"""

from __future__ import annotations

from typing import Any

from schemathesis.specs.openapi import negative
from schemathesis.transport.serialization import Binary

if not callable(getattr(negative, "_strip_binary", None)):
    raise RuntimeError("schemathesis no longer has negative._strip_binary: review this correction")


def _same_length_stand_in(value: Any) -> Any:
    if isinstance(value, Binary):
        return "b" * len(value.data)
    if isinstance(value, dict):
        return {key: _same_length_stand_in(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_same_length_stand_in(item) for item in value]
    return value


negative._strip_binary = _same_length_stand_in
