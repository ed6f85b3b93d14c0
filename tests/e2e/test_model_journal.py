"""The model-call journal: an openai run SIGKILLed between a model answer and its tool resumes without
asking the model anything twice (counted at the fake OpenAI-compatible server)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from tests.support.api import Api, probe
from tests.support.fake_openai import PACED, killed_amid_a_batch, seeded_workspace
from tests.support.fake_openai import running as fake_openai_server
from tests.support.stack import RunningStack, stack_running

# It runs on a stack of its own, whose processes it kills: the local stack only (make test-containers deselects it).
pytestmark = pytest.mark.local_stack

STEPS = 7  # the fake's walk: six tool calls, then finish


@pytest.fixture(scope="module")
def walking_model() -> Iterator[str]:
    with fake_openai_server("walk") as url:
        yield url


@pytest.fixture(scope="module")
def paced_stack(tmp_path_factory: pytest.TempPathFactory, walking_model: str) -> Iterator[RunningStack]:
    env = {**PACED, "DOSSIER_OPENAI_BASE_URL": f"{walking_model}/v1", "DOSSIER_OPENAI_MODEL": "fake-walk"}
    with stack_running(tmp_path_factory.mktemp("journal-home"), extra_env=env) as running:
        yield running


def model_inputs(url: str) -> list[str]:
    """Every request body the fake model received, canonical, in order."""
    return [json.dumps(r["body"], sort_keys=True) for r in httpx.get(f"{url}/requests").json()]


def test_a_sigkilled_openai_run_resumes_without_repeating_a_model_call(
    paced_stack: RunningStack, walking_model: str
) -> None:
    api = Api(paced_stack)
    ws = seeded_workspace(api)

    clean = api.wait_run(api.start_run(ws, "What holds?", model="openai")["id"], timeout=120)
    assert clean["status"] == "completed", clean["error"]
    assert len(model_inputs(walking_model)) == STEPS == clean["stats"]["model_requests"]
    assert "replayed" not in {r["stage"] for r in api.ledger(clean["id"])}

    run = api.start_run(ws, "What holds now?", model="openai")
    # Three answers journaled and counted; the worker now waits between the third answer and its tool.
    probe(lambda: api.run(run["id"])["stats"]["model_requests"] >= 3, timeout=60, interval=0.02)
    paced_stack.kill("runhost")
    run = api.wait_run(run["id"], timeout=120)
    assert run["status"] == "completed", run["error"]

    inputs = model_inputs(walking_model)[STEPS:]
    assert len(inputs) == STEPS, "the resumed run asked the model more (or less) than a clean run"
    assert len(set(inputs)) == len(inputs), "an input was sent to the model twice"
    assert run["stats"]["model_requests"] == STEPS
    # The replayed answer was counted when the crashed attempt got it, and only then.
    assert run["stats"]["steps"] == STEPS and run["stats"]["tokens_in"] == 100 * STEPS == clean["stats"]["tokens_in"]
    replayed = [r for r in api.ledger(run["id"]) if r["stage"] == "replayed"]
    assert len(replayed) == 1 and replayed[0]["ref"] is None
    assert replayed[0]["model_request"] == f"{run['id']}:r3" and len(replayed[0]["content_hash"]) == 64


def test_a_run_killed_amid_the_calls_of_one_answer_runs_the_rest_without_asking_again(
    paced_stack: RunningStack, walking_model: str
) -> None:
    api = Api(paced_stack)
    run, ledger = killed_amid_a_batch(api, paced_stack, walking_model)
    assert [r["stage"] for r in ledger if r["stage"] != "replayed"] == ["listed"]
    assert {"notes/first.md", "notes/second.md", "catalog.md"} <= set(api.files(run["id"]))
