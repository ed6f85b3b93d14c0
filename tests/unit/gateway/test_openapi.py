"""The API describes itself: typed success bodies, the real error envelope per status, bearer auth, tags."""

from __future__ import annotations

import re
from typing import Any

import pytest

from services.gateway.app import create_app
from shared.contracts.common import NOT_BLANK
from shared.settings import GatewaySettings

ENVELOPE = "#/components/schemas/ErrorEnvelope"
UNAUTHENTICATED_ROUTES = {("get", "/v1/health")}


@pytest.fixture(scope="module")
def spec() -> dict[str, Any]:
    return create_app(GatewaySettings()).openapi()


def operations(spec: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [(method, path, op) for path, ops in spec["paths"].items() for method, op in ops.items()]


def test_every_operation_has_a_clean_unique_id_and_a_tag(spec: dict[str, Any]) -> None:
    ids = [op["operationId"] for _, _, op in operations(spec)]
    assert len(ids) == len(set(ids))
    for op_id in ids:
        assert re.fullmatch(r"[a-z][a-z_]*[a-z]", op_id), op_id
    assert all(op.get("tags") for _, _, op in operations(spec))


def test_every_success_body_has_a_schema(spec: dict[str, Any]) -> None:
    for method, path, op in operations(spec):
        successes = {status: r for status, r in op["responses"].items() if status.startswith("2")}
        assert successes, (method, path)
        for status, response in successes.items():
            if status == "204":
                assert "content" not in response, (method, path)
                continue
            content = response.get("content")
            assert content, (method, path, status)
            for media in content.values():
                schema = media["schema"]
                assert schema.get("$ref") or schema.get("type") == "string", (method, path, status, schema)


def test_every_error_status_answers_the_envelope(spec: dict[str, Any]) -> None:
    text = str(spec)
    assert "HTTPValidationError" not in text
    for method, path, op in operations(spec):
        errors = {status: r for status, r in op["responses"].items() if status[0] in "45"}
        if path.startswith("/v1") and (method, path) not in UNAUTHENTICATED_ROUTES:
            assert {"401", "408", "422", "429", "500"} <= set(errors), (method, path)
            assert "Retry-After" in errors["429"]["headers"], (method, path)
            if method in ("post", "put"):
                assert "413" in errors, (method, path)
        for status, response in errors.items():
            if path == "/v1/health":
                continue
            assert response["content"]["application/json"]["schema"]["$ref"] == ENVELOPE, (method, path, status)
    envelope = spec["components"]["schemas"]["ErrorEnvelope"]
    assert envelope["required"] == ["error"]
    body = spec["components"]["schemas"]["ErrorBody"]
    assert set(body["properties"]) == {"code", "message", "details"}


def test_bearer_security_is_declared_on_every_guarded_route(spec: dict[str, Any]) -> None:
    assert spec["components"]["securitySchemes"]["bearer"] == {
        "type": "http",
        "scheme": "bearer",
        "description": spec["components"]["securitySchemes"]["bearer"]["description"],
    }
    for method, path, op in operations(spec):
        if (method, path) in UNAUTHENTICATED_ROUTES:
            assert "security" not in op
        else:
            assert op["security"] == [{"bearer": []}], (method, path)


def test_multipart_and_text_bodies_are_described(spec: dict[str, Any]) -> None:
    upload = spec["paths"]["/v1/assets"]["post"]["requestBody"]["content"]["multipart/form-data"]["schema"]
    assert upload["properties"]["file"] == {"type": "string", "format": "binary", "minLength": 1}
    assert upload["additionalProperties"] is False
    assert set(upload["required"]) == {"file", "source_id"}
    artifact = spec["paths"]["/v1/artifacts"]["post"]["requestBody"]["content"]["multipart/form-data"]["schema"]
    assert set(artifact["required"]) == {"file", "title"}
    plan = spec["paths"]["/v1/runs/{run_id}/files/{path}"]["put"]["requestBody"]["content"]
    assert plan == {"text/plain": {"schema": {"type": "string", "pattern": NOT_BLANK}}}


def test_the_run_schema_carries_stats(spec: dict[str, Any]) -> None:
    run = spec["components"]["schemas"]["Run"]
    assert "stats" in run["properties"]
    stats = spec["components"]["schemas"]["RunStats"]
    assert set(stats["properties"]) == {
        "steps",
        "model_requests",
        "model_input_chars_max",
        "model_input_chars_total",
        "source_chars_read",
        "tokens_in",
        "tokens_out",
        "claims_supported",
        "claims_weak",
        "claims_unsupported",
    }


def test_the_metrics_route_documents_its_401(spec: dict[str, Any]) -> None:
    responses = spec["paths"]["/metrics"]["get"]["responses"]
    assert responses["401"]["content"]["application/json"]["schema"]["$ref"].endswith("/ErrorEnvelope")
