"""The research loop with streamed model replies (`DOSSIER_OPENAI_STREAM=true`) against the fake
OpenAI-compatible server (tests/support/fake_openai.py, its own process), which sends every reply as
`chat.completion.chunk` events with tool-call arguments split over many chunks: the assembled reply takes
the same steps as a whole one (sources read and cited, a cut call answered back, the journal's replay after
a SIGKILL), and a cancel closes a stream that never ends."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests.support.api import Api, probe
from tests.support.fake_openai import (
    PACED,
    SCENARIO_ANSWER,
    killed_amid_a_batch,
    model_env,
    read_and_cited_the_sources,
    requests_of,
    scenario_run,
    seeded_workspace,
    sourced_workspace,
)
from tests.support.stack import RunningStack, stack_running


@pytest.fixture(scope="module")
def stream_stack(tmp_path_factory: pytest.TempPathFactory, model_server: str) -> Iterator[RunningStack]:
    env = model_env(model_server, "fake-stream", stream="true") | PACED
    with stack_running(tmp_path_factory.mktemp("stream-home"), extra_env=env) as running:
        yield running


def test_a_streamed_run_reads_and_cites_the_sources(stream_stack: RunningStack, model_server: str) -> None:
    api = Api(stream_stack)
    run, question = scenario_run(api, sourced_workspace(api), "catalog", timeout=180)
    read_and_cited_the_sources(api, run)
    sent = requests_of(model_server, question)
    assert len(sent) == 5 == run["stats"]["model_requests"], "list, read catalog.md, search, read, finish"
    assert all(r["stream"] and r["body"]["stream_options"] == {"include_usage": True} for r in sent)
    # Three parallel calls arrived as fragments over many chunks and all ran, each its own step.
    assert all(r["chunks"] >= 5 for r in sent) and max(r["chunks"] for r in sent) > 20
    assert run["stats"]["steps"] == 1 + 1 + 3 + 3 + 1
    # Usage came in the stream's last chunk and is counted as a whole reply's is.
    assert run["stats"]["tokens_in"] == 500 and run["stats"]["tokens_out"] == 50


def test_a_streamed_cut_tool_call_is_answered_back(stream_stack: RunningStack, model_server: str) -> None:
    api = Api(stream_stack)
    run, question = scenario_run(api, seeded_workspace(api), "length_call")
    assert run["status"] == "completed", run["error"]
    assert SCENARIO_ANSWER in api.read(run["publication"])["body"]
    sent = requests_of(model_server, question)
    assert len(sent) == 2 == run["stats"]["model_requests"] and all(r["stream"] for r in sent)
    answered = sent[1]["body"]["messages"][-2]
    # The cut call, assembled from its fragments, is answered as its own tool call and never run.
    assert answered["role"] == "tool" and answered["tool_call_id"] == "cut-0"
    assert "cut at the output limit" in answered["content"]
    said = sent[1]["body"]["messages"][-3]["tool_calls"][0]
    assert said["function"]["name"] == "write_draft"
    assert "draft.md" not in api.files(run["id"])
    assert api.ledger(run["id"]) == []


def test_a_cancel_stops_a_stream_midway(stream_stack: RunningStack, model_server: str) -> None:
    api = Api(stream_stack)
    question = f"scenario:trickle {uuid.uuid4().hex[:8]}"
    run = api.start_run(seeded_workspace(api), question, model="openai")
    # The stream is under way: its chunks keep coming, and would until the two-minute deadline.
    probe(lambda: (requests_of(model_server, question) or [{}])[0].get("chunks", 0) >= 3, timeout=60)
    api.ok("POST", f"/v1/runs/{run['id']}/cancel")
    run = api.wait_run(run["id"], timeout=60)
    assert run["status"] == "cancelled" and run["publication"] is None
    # The run closed the stream: the server's next write found the connection gone.
    probe(lambda: requests_of(model_server, question)[0].get("dropped") is not None, timeout=30)
    assert len(requests_of(model_server, question)) == 1
    assert run["stats"]["model_requests"] == 0 and api.ledger(run["id"]) == []


def test_a_streamed_run_killed_amid_its_calls_resumes_without_asking_again(
    stream_stack: RunningStack, model_server: str
) -> None:
    run, _ = killed_amid_a_batch(Api(stream_stack), stream_stack, model_server)
    assert run["stats"]["tokens_in"] == 200
