"""Which policy drives a run: `extractive` (default), `openai`, or `scripted:<name>` (tests)."""

from __future__ import annotations

import re
from pathlib import Path

from services.runhost.policies.base import Policy
from services.runhost.policies.extractive import ExtractivePolicy
from services.runhost.policies.scripted import ScriptedPolicy
from shared.errors import Invalid, NotFound
from shared.settings import RunhostSettings

_SCRIPT = re.compile(r"^scripted:([A-Za-z0-9_-]{1,60})$")


def validate_model(model: str, settings: RunhostSettings) -> str:
    if model in ("extractive", "openai"):
        return model
    match = _SCRIPT.match(model)
    if match is None:
        raise Invalid(f"unknown model {model!r}", {"field": "model"})
    if settings.scripts_dir is None or not (settings.scripts_dir / f"{match[1]}.json").is_file():
        # A well-formed name of a script this run host does not hold: missing, not malformed.
        raise NotFound(f"no script named {match[1]!r}", {"field": "model"})
    return model


def make_policy(model: str, settings: RunhostSettings) -> Policy:
    if model == "extractive":
        return ExtractivePolicy()
    if model == "openai":
        # The SDK is half a second of imports: loaded by the first run that uses it, not at start.
        from services.runhost.policies.openai import OpenAIPolicy

        return OpenAIPolicy(
            base_url=settings.openai_base_url,
            api_key=settings.openai_api_key,
            model=settings.openai_model,
            backoff_seconds=settings.openai_backoff_seconds,
            max_backoff_seconds=settings.openai_max_backoff_seconds,
            retry_seconds=settings.openai_retry_seconds,
            timeout=settings.openai_timeout_seconds,
            max_attempts=settings.openai_max_attempts,
            unusable_replies=settings.openai_unusable_replies,
            parallel_tool_calls=settings.openai_parallel_tool_calls,
            stream=settings.openai_stream,
        )
    match = _SCRIPT.match(model)
    if match and settings.scripts_dir is not None:
        return ScriptedPolicy.from_file(Path(settings.scripts_dir) / f"{match[1]}.json")
    raise Invalid(f"unknown model {model!r}", {"field": "model"})
