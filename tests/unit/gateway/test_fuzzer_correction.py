"""The correction tests/e2e/test_schemathesis.py loads into the fuzzer judges a broken upload by its broken value."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import jsonschema_rs
import pytest
from schemathesis.specs.openapi import negative
from schemathesis.transport.serialization import Binary

from services.gateway.app import create_app
from shared.settings import GatewaySettings

HOOKS = Path(__file__).parents[2] / "support" / "schemathesis_hooks.py"


@pytest.fixture
def upload_schema() -> dict[str, Any]:
    spec = create_app(GatewaySettings()).openapi()
    body: dict[str, Any] = spec["paths"]["/v1/assets"]["post"]["requestBody"]
    return dict(body["content"]["multipart/form-data"]["schema"])


def test_a_still_valid_value_is_not_taken_for_a_broken_one(
    upload_schema: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    validator = jsonschema_rs.validator_for(upload_schema)
    # What the fuzzer sent in the failure it reported: `*` appended to a source id, which the pattern allows.
    still_valid = {"file": Binary(b"\x18Z8"), "source_id": ">\u00e6*"}
    broken = {"file": Binary(b"\x18Z8"), "source_id": "a/b"}
    empty = {"file": Binary(b""), "source_id": "S1"}
    # Unpatched, the empty stand-in for the file makes every body look broken.
    assert not validator.is_valid(negative._strip_binary(still_valid))

    monkeypatch.setattr(negative, "_strip_binary", negative._strip_binary)
    spec = importlib.util.spec_from_file_location("schemathesis_hooks", HOOKS)
    assert spec is not None and spec.loader is not None
    spec.loader.exec_module(importlib.util.module_from_spec(spec))

    assert validator.is_valid(negative._strip_binary(still_valid))
    assert not validator.is_valid(negative._strip_binary(broken))
    assert not validator.is_valid(negative._strip_binary(empty))
