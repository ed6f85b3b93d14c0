"""The corrections tests/e2e/test_schemathesis.py loads into the fuzzer judge an upload by the values it sends."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import jsonschema_rs
import pytest
import schemathesis
from schemathesis.core.parameters import ParameterLocation
from schemathesis.generation.case import Case
from schemathesis.specs.openapi import negative
from schemathesis.transport.serialization import Binary

from services.gateway.app import create_app
from shared.settings import GatewaySettings

HOOKS = Path(__file__).parents[2] / "support" / "schemathesis_hooks.py"
STILL_VALID = {"file": Binary(b"\x18Z8"), "source_id": ">\u00e6*"}
VALID = {"file": Binary(b"\x18Z8"), "source_id": "S1", "workspace_id": "ws_10f840c32b904fe1b40a8f9c2383dece"}
BROKEN = {"file": Binary(b"\x18Z8"), "source_id": "a/b"}
EMPTY = {"file": Binary(b""), "source_id": "S1"}


@pytest.fixture(scope="module")
def spec() -> dict[str, Any]:
    return create_app(GatewaySettings()).openapi()


def load_corrections(monkeypatch: pytest.MonkeyPatch) -> None:
    """The hooks loaded as the CLI loads them; the originals come back after the test."""
    monkeypatch.setattr(negative, "_strip_binary", negative._strip_binary)
    monkeypatch.setattr(Case, "_validate_component", Case._validate_component)
    loaded = importlib.util.spec_from_file_location("schemathesis_hooks", HOOKS)
    assert loaded is not None and loaded.loader is not None
    loaded.loader.exec_module(importlib.util.module_from_spec(loaded))


def test_a_broken_value_is_judged_by_itself(spec: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    body_schema = spec["paths"]["/v1/assets"]["post"]["requestBody"]["content"]["multipart/form-data"]["schema"]
    validator = jsonschema_rs.validator_for(body_schema)
    # What the fuzzer sent in the first failure: `*` appended to a source id, which the pattern allows.
    assert not validator.is_valid(negative._strip_binary(STILL_VALID))

    load_corrections(monkeypatch)
    assert validator.is_valid(negative._strip_binary(STILL_VALID))
    assert not validator.is_valid(negative._strip_binary(BROKEN))
    assert not validator.is_valid(negative._strip_binary(EMPTY))


def test_a_changed_upload_is_judged_by_its_values(spec: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    schema = schemathesis.openapi.from_dict(spec)
    upload = schema["/v1/assets"]["POST"]
    validator_cls = schema.adapter.jsonschema_validator_cls

    def valid(body: dict[str, Any]) -> bool:
        case = upload.Case(body=body, media_type="multipart/form-data")
        return bool(case._validate_component(ParameterLocation.BODY, body, validator_cls))

    # The second failure: any body holding a file was judged invalid once the stateful phase changed it.
    assert not valid(VALID)

    load_corrections(monkeypatch)
    assert valid(VALID)
    assert not valid(BROKEN)
    assert not valid(EMPTY)
