"""Corrections to schemathesis, loaded into its CLI by tests/e2e/test_schemathesis.py (SCHEMATHESIS_HOOKS).

Schemathesis cannot judge a multipart body that holds a file, in two places, and both make it expect a
valid upload to be refused ("schema-violating request accepted"; CI failed on each once):
- To break one value of a valid body, it checks that the broken body really violates the document, after
  standing an empty string in for every file part. The gateway's document says an uploaded file holds at
  least one byte (`minLength: 1`), so the stand-in alone failed that check, and a body whose broken value
  was still valid (a `source_id` with `*` appended) was sent as invalid data.
- When the stateful phase changes a generated body (a workspace id taken from an earlier response), it
  judges the body again, and calls any body that holds a file invalid outright: a valid upload to that
  workspace was then expected to be refused.
Here a file part stands in as a string as long as its bytes, so both judge the values actually sent.
"""

from __future__ import annotations

from typing import Any

from schemathesis.core.parameters import ParameterLocation
from schemathesis.generation.case import Case
from schemathesis.specs.openapi import negative
from schemathesis.transport.serialization import Binary

if not callable(getattr(negative, "_strip_binary", None)) or not callable(getattr(Case, "_validate_component", None)):
    raise RuntimeError("schemathesis no longer has the functions these corrections replace: review them")


def same_length_stand_in(value: Any) -> Any:
    """`value` with each file part (Binary or bytes) replaced by a string of as many characters as it has bytes."""
    if isinstance(value, Binary):
        return "b" * len(value.data)
    if isinstance(value, bytes):
        return "b" * len(value)
    if isinstance(value, dict):
        return {key: same_length_stand_in(item) for key, item in value.items()}
    if isinstance(value, list):
        return [same_length_stand_in(item) for item in value]
    return value


_validate_component = Case._validate_component


def _validate_with_files(self: Case, location: ParameterLocation, value: Any, validator_cls: Any) -> bool:
    if location == ParameterLocation.BODY:
        value = same_length_stand_in(value)
    return bool(_validate_component(self, location, value, validator_cls))


negative._strip_binary = same_length_stand_in
Case._validate_component = _validate_with_files  # type: ignore[method-assign]
