"""Which policy drives a run: `extractive` (default), `openai`, or `scripted:<name>` (tests), as the model
name reads (`shared.contracts.runhost.parse_model`)."""

from __future__ import annotations

from pathlib import Path

from services.runhost.policies.base import Policy
from services.runhost.policies.extractive import ExtractivePolicy
from services.runhost.policies.scripted import ScriptedPolicy
from shared.contracts.runhost import ModelName, parse_model
from shared.errors import Invalid, NotFound
from shared.settings import RunhostSettings


def _policy_name(model: str) -> ModelName:
    """The name of one of the run host's own policies (an outside agent's `external` is none)."""
    name = parse_model(model)
    if name is None or name.kind == "external":
        raise Invalid(f"unknown model {model!r}", {"field": "model"})
    return name


def _script(settings: RunhostSettings, script: str) -> Path | None:
    """Where the script named `script` is kept, if this run host has a scripts folder."""
    return None if settings.scripts_dir is None else Path(settings.scripts_dir) / f"{script}.json"


def validate_model(model: str, settings: RunhostSettings) -> str:
    name = _policy_name(model)
    if name.script is not None:
        path = _script(settings, name.script)
        if path is None or not path.is_file():
            # A well-formed name of a script this run host does not hold: missing, not malformed.
            raise NotFound(f"no script named {name.script!r}", {"field": "model"})
    return model


def make_policy(model: str, settings: RunhostSettings) -> Policy:
    name = _policy_name(model)
    if name.kind == "extractive":
        return ExtractivePolicy()
    if name.kind == "openai":
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
    script = _script(settings, name.script or "")
    if script is None:
        raise Invalid(f"unknown model {model!r}", {"field": "model"})
    return ScriptedPolicy.from_file(script)
