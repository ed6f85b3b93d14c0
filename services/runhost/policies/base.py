"""The one interface every policy implements, and how a policy says it could not decide a next step."""

from __future__ import annotations

from typing import Protocol

from services.runhost.policies.vocabulary import ModelInput, ToolCall


class PolicyError(Exception):
    """The model endpoint could not produce a next step; the run fails with this reason."""


class Policy(Protocol):
    async def next_step(self, model_input: ModelInput) -> ToolCall: ...
