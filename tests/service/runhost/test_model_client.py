"""The model client against the scripted model server (its own process): the retry budget ends with a
logged give-up naming the run, and the whole-request deadline stops a server that trickles bytes, a whole
reply or a stream; a stream's error event and a stream cut short are retried."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest

from services.runhost.policies.openai import OpenAIPolicy, PolicyError
from services.runhost.policies.vocabulary import ModelInput, RunView
from services.runhost.tool_args import TOOLS
from tests.support.fake_openai import running as fake_openai_server


@pytest.fixture
async def model_url() -> AsyncIterator[str]:
    with fake_openai_server() as url:
        yield url


@asynccontextmanager
async def policy_at(model_url: str, **options: Any) -> AsyncIterator[OpenAIPolicy]:
    """The client against the scripted server, closed afterwards whatever the test found."""
    policy = OpenAIPolicy(base_url=f"{model_url}/v1", **({"api_key": "", "model": "m"} | options))
    try:
        yield policy
    finally:
        await policy.close()


async def sent_requests(model_url: str) -> list[dict[str, Any]]:
    async with httpx.AsyncClient() as client:
        requests: list[dict[str, Any]] = (await client.get(f"{model_url}/requests")).json()
    return requests


def model_input(run_id: str, question: str) -> ModelInput:
    view = RunView(run_id, 1, "goal", question, {"items": [], "complete": True, "omitted": 0}, [], {}, "", 0, [])
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": f"Question: {question}"}]
    return ModelInput(f"{run_id}:r1", messages, TOOLS, view)


async def test_an_outage_longer_than_the_budget_fails_with_a_logged_give_up(
    model_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    async with policy_at(model_url, backoff_seconds=0.1, retry_seconds=3) as policy:
        with caplog.at_level(logging.WARNING, logger="dossier.runhost.model"), pytest.raises(PolicyError) as failed:
            await policy.next_step(model_input("run_budget", "scenario:outage:600 budget"))
    assert "HTTP 503" in str(failed.value)
    assert any("run run_budget: model endpoint given up" in r.getMessage() for r in caplog.records)
    requests = await sent_requests(model_url)
    assert len(requests) >= 2 and all(r["status"] == 503 for r in requests)


async def test_a_trickling_reply_meets_the_whole_request_deadline(model_url: str) -> None:
    async with policy_at(model_url, backoff_seconds=0.1, retry_seconds=1, timeout=2) as policy:
        with pytest.raises(PolicyError) as failed:
            await policy.next_step(model_input("run_trickle", "scenario:trickle deadline"))
    assert "no whole reply within 2 s" in str(failed.value)


async def test_parallel_tool_calls_false_is_sent_and_every_returned_call_is_kept(model_url: str) -> None:
    async with policy_at(model_url, api_key="sk-x", parallel_tool_calls=False) as policy:
        step = await policy.next_step(model_input("run_par", "scenario:parallel flag"))
    # A server may ignore the flag: whatever calls it returns are all kept, in order.
    assert [c.call_id for c in step.calls()] == ["par-0", "par-1", "par-2"]
    (sent,) = await sent_requests(model_url)
    assert sent["body"]["parallel_tool_calls"] is False and sent["auth"] == "Bearer sk-x"


async def test_a_trickling_stream_meets_the_whole_request_deadline(model_url: str) -> None:
    async with policy_at(model_url, backoff_seconds=0.1, retry_seconds=1, timeout=2, stream=True) as policy:
        with pytest.raises(PolicyError) as failed:
            await policy.next_step(model_input("run_trickle_stream", "scenario:trickle stream deadline"))
    assert "no whole reply within 2 s" in str(failed.value)
    requests = await sent_requests(model_url)
    assert requests and all(r["stream"] and r["chunks"] >= 2 for r in requests)


@pytest.mark.parametrize(("scenario", "call_id"), [("errorbody", "s-0"), ("cutstream", "s-0")])
async def test_a_stream_error_event_or_a_stream_cut_short_is_retried(
    model_url: str, scenario: str, call_id: str
) -> None:
    async with policy_at(model_url, backoff_seconds=0.1, stream=True) as policy:
        step = await policy.next_step(model_input("run_stream", f"scenario:{scenario} streamed"))
    expected = "list_catalog" if scenario == "errorbody" else "finish"
    assert step.name == expected and step.tokens_in == 100 and not step.problem
    first, second = await sent_requests(model_url)
    assert first["body"] == second["body"] and first["stream"] and second["chunks"] > first["chunks"]


@pytest.mark.parametrize("stream", [False, True])
async def test_a_stall_longer_than_one_attempts_deadline_is_retried(model_url: str, stream: bool) -> None:
    # The budget no longer than one attempt's deadline, as both once defaulted to 120 s: a request that
    # timed out must still get its retry, as the budget runs from the first failure.
    async with policy_at(model_url, backoff_seconds=0.1, retry_seconds=1, timeout=1, stream=stream) as policy:
        step = await policy.next_step(model_input("run_stall", f"scenario:stall:3 stream={stream}"))
    assert step.name == "list_catalog" and not step.problem and step.tokens_in == 100
    first, second = await sent_requests(model_url)
    assert first["body"] == second["body"] and second["status"] == 200


async def test_a_stream_cut_after_its_finish_reason_is_kept_not_asked_again(model_url: str) -> None:
    async with policy_at(model_url, backoff_seconds=0.1, retry_seconds=2, stream=True) as policy:
        step = await policy.next_step(model_input("run_cut_done", "scenario:cutdone kept"))
    assert step.name == "list_catalog" and step.call_id == "s-0" and not step.problem
    # The usage chunk never came: the reply is kept without token counts.
    assert step.tokens_in is None and step.tokens_out is None
    (sent,) = await sent_requests(model_url)
    assert sent["stream"] and sent["chunks"] >= 3


@pytest.mark.parametrize("stream", [False, True])
async def test_replies_without_choices_fail_after_three_attempts_whatever_the_budget(
    model_url: str, stream: bool, caplog: pytest.LogCaptureFixture
) -> None:
    async with policy_at(model_url, backoff_seconds=0.05, retry_seconds=10, stream=stream) as policy:
        with caplog.at_level(logging.WARNING, logger="dossier.runhost.model"), pytest.raises(PolicyError) as failed:
            await policy.next_step(model_input("run_nochoices", f"scenario:nochoices stream={stream}"))
    assert "answered 3 times with nothing usable" in str(failed.value) and "without choices" in str(failed.value)
    assert any("run run_nochoices: model endpoint given up" in r.getMessage() for r in caplog.records)
    assert len(await sent_requests(model_url)) == 3


async def test_an_outage_meets_the_attempts_cap_before_the_time_budget(model_url: str) -> None:
    async with policy_at(model_url, backoff_seconds=0.05, retry_seconds=600, max_attempts=3) as policy:
        with pytest.raises(PolicyError) as failed:
            await policy.next_step(model_input("run_cap", "scenario:outage:600 cap"))
    assert "failed 3 attempts in " in str(failed.value) and "the most attempts a request makes: HTTP 503" in str(
        failed.value
    )
    assert len(await sent_requests(model_url)) == 3
