"""The model loop's budget and refusals against the fake OpenAI-compatible server (its own process), on a
streaming stack whose retry budget is no longer than one request's deadline (2 s each, as both once
defaulted to 120 s): a stall past the deadline is retried and the run completes; a stream cut after its
`finish_reason` is kept, not asked for again; replies without choices fail the run after three; a note
over its limit is refused naming the limit and the size sent. The server counts every request."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.api import Api
from tests.support.fake_openai import (
    SCENARIO_ANSWER,
    completed_scenario,
    model_env,
    requests_of,
    scenario_run,
    seeded_workspace,
)
from tests.support.stack import RunningStack, stack_running

# It runs on a stack of its own: the local stack only (make test-containers deselects it).
pytestmark = pytest.mark.local_stack


@pytest.fixture(scope="module")
def budget_stack(tmp_path_factory: pytest.TempPathFactory, model_server: str) -> Iterator[RunningStack]:
    env = model_env(model_server, "fake-budget", stream="true", timeout_seconds="2", retry_seconds="2")
    with stack_running(tmp_path_factory.mktemp("budget-home"), extra_env=env) as running:
        yield running


def test_a_stall_past_one_deadline_then_a_good_reply_completes_the_run(
    budget_stack: RunningStack, model_server: str
) -> None:
    api, run, sent = completed_scenario(budget_stack, model_server, "stall:6")
    assert SCENARIO_ANSWER in api.read(run["publication"])["body"]
    # The stalled request, its retry, then the finish.
    assert len(sent) == 3 and sent[0]["body"] == sent[1]["body"]
    assert run["stats"]["model_requests"] == 2
    assert [r["stage"] for r in api.ledger(run["id"])] == ["listed"]


def test_a_stream_cut_after_its_finish_reason_is_not_asked_for_again(
    budget_stack: RunningStack, model_server: str
) -> None:
    api, run, sent = completed_scenario(budget_stack, model_server, "cutdone")
    assert SCENARIO_ANSWER in api.read(run["publication"])["body"]
    # Both replies were cut after their finish_reason, and each was asked for once.
    assert len(sent) == 2 == run["stats"]["model_requests"] and all(r["stream"] for r in sent)
    assert sent[0]["body"] != sent[1]["body"]
    # The usage chunks never came.
    assert run["stats"]["tokens_in"] is None and run["stats"]["tokens_out"] is None


def test_replies_without_choices_fail_the_run_after_three(budget_stack: RunningStack, model_server: str) -> None:
    api = Api(budget_stack)
    run, question = scenario_run(api, seeded_workspace(api), "nochoices")
    assert run["status"] == "failed" and run["publication"] is None
    assert "answered 3 times with nothing usable" in run["error"] and "a stream without choices" in run["error"]
    assert len(requests_of(model_server, question)) == 3
    assert run["stats"]["model_requests"] == 0


def test_a_note_over_its_limit_is_refused_naming_the_limit_and_its_size(
    budget_stack: RunningStack, model_server: str
) -> None:
    api, run, sent = completed_scenario(budget_stack, model_server, "bignote")
    assert len(sent) == 2 == run["stats"]["model_requests"]
    (answered,) = [m for m in sent[1]["body"]["messages"] if m.get("tool_call_id") == "big-0"]
    assert answered["content"] == "error: invalid: the note is too long: 200,000 characters, the limit is 20,000"
    assert "notes/big.md" not in api.files(run["id"])
