"""The one grammar of model names: what it reads, and that the contract's patterns are the same grammar."""

import re

import pytest

from shared.contracts.runhost import MODEL_PATTERN, POLICY_PATTERN, ModelName, parse_model


@pytest.mark.parametrize(
    ("name", "parsed"),
    [
        ("extractive", ModelName("extractive")),
        ("openai", ModelName("openai")),
        ("external", ModelName("external")),
        ("scripted:happy_path-1", ModelName("scripted", "happy_path-1")),
        ("scripted:", None),
        ("scripted:a b", None),
        ("scripted:" + "x" * 61, None),
        ("OpenAI", None),
        ("", None),
    ],
)
def test_parse_model(name: str, parsed: ModelName | None) -> None:
    assert parse_model(name) == parsed
    assert (re.fullmatch(MODEL_PATTERN, name) is not None) == (parsed is not None)


def test_a_policy_is_a_model_but_external() -> None:
    for name in ("extractive", "openai", "scripted:x", "external"):
        assert (re.fullmatch(POLICY_PATTERN, name) is not None) == (name != "external")
