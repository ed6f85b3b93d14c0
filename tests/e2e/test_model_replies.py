"""The research loop against a model server that misbehaves as real ones do (tests/support/fake_openai.py,
run as its own process): only `finish` finishes a run; narration, cut, filtered and empty replies are
answered back and counted; a repeated failure fails the run; parallel calls all run; outages and error
bodies are ridden out; a cancel stops a request in flight. Each test asserts the run's outcome, its
ledger and how many requests the model server got."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.api import Api, probe
from tests.support.fake_openai import (
    BADCITE_ANSWER,
    GATED_MEMOS,
    GATED_PAGES,
    NARRATION,
    SCENARIO_ANSWER,
    completed_scenario,
    gated_workspace,
    read_and_cited_the_sources,
    requests_of,
    scenario_run,
    seeded_workspace,
    sourced_workspace,
)
from tests.support.stack import RunningStack, stack_running

# It runs on a stack of its own, and its logs: the local stack only (make test-containers deselects it).
pytestmark = pytest.mark.local_stack


@pytest.fixture(scope="module")
def model_stack(tmp_path_factory: pytest.TempPathFactory, model_server: str) -> Iterator[RunningStack]:
    scripts = tmp_path_factory.mktemp("scripts")
    # An earlier run that publishes at once: what 40 earlier runs leave in a workspace, quickly.
    (scripts / "quick.json").write_text(json.dumps([{"name": "finish", "arguments": {"answer": "# earlier\n"}}]))
    env = {
        "DOSSIER_SCRIPTS_DIR": str(scripts),
        "DOSSIER_MODEL": "openai",
        "DOSSIER_OPENAI_BASE_URL": f"{model_server}/v1",
        "DOSSIER_OPENAI_MODEL": "fake-scenarios",
        "DOSSIER_OPENAI_BACKOFF_SECONDS": "0.2",
    }
    with stack_running(tmp_path_factory.mktemp("replies-home"), extra_env=env) as running:
        yield running


def runhost_log(stack: RunningStack) -> str:
    assert stack.home is not None
    return (Path(stack.home) / "logs" / "runhost.log").read_text(errors="replace")


def test_narration_first_is_answered_back_and_never_published(model_stack: RunningStack, model_server: str) -> None:
    api = Api(model_stack)
    ws = seeded_workspace(api)
    run, question = scenario_run(api, ws, "narration")
    assert run["status"] == "completed", run["error"]
    published = api.read(run["publication"])
    assert NARRATION not in published["body"] and SCENARIO_ANSWER in published["body"]
    sent = requests_of(model_server, question)
    assert len(sent) == 2 == run["stats"]["model_requests"] == run["stats"]["steps"]
    said, answered = sent[1]["body"]["messages"][-3:-1]
    assert said == {"role": "assistant", "content": NARRATION[:200]}
    assert answered["role"] == "user" and "text without a tool call" in answered["content"]
    assert api.ledger(run["id"]) == []
    # The model saw the checkpoint's revision, so a second run's proposal applies as well (not stale).
    assert run["checkpoint_proposal"]["status"] == "applied"
    second, question = scenario_run(api, ws, "empty")
    assert second["checkpoint_proposal"] == {"status": "applied", "revision": 2}
    assert "Checkpoint revision: 1" in requests_of(model_server, question)[0]["body"]["messages"][1]["content"]


@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("length_call", "cut at the output limit"),
        ("length_text", "cut at the output limit"),
        ("content_filter", "content filter"),
        ("empty", "your reply was empty"),
    ],
)
def test_a_cut_filtered_or_empty_reply_is_answered_back(
    model_stack: RunningStack, model_server: str, name: str, said: str
) -> None:
    api, run, sent = completed_scenario(model_stack, model_server, name)
    assert SCENARIO_ANSWER in api.read(run["publication"])["body"]
    assert len(sent) == 2 == run["stats"]["model_requests"]
    answered = sent[1]["body"]["messages"][-2]
    assert said in answered["content"]
    if name == "length_call":
        # The cut call is answered as its own tool call, and its cut arguments were never run.
        assert answered["role"] == "tool" and answered["tool_call_id"] == "cut-0"
        assert "draft.md" not in api.files(run["id"])
    assert api.ledger(run["id"]) == []
    assert run["stats"]["tokens_in"] == 200 and run["stats"]["tokens_out"] == 20


def test_the_same_failing_reply_three_times_fails_the_run(model_stack: RunningStack, model_server: str) -> None:
    api = Api(model_stack)
    ws = seeded_workspace(api)
    run, question = scenario_run(api, ws, "repeat")
    assert run["status"] == "failed" and run["publication"] is None
    assert "3 times in a row" in run["error"] and "text without a tool call" in run["error"]
    assert len(requests_of(model_server, question)) == 3 == run["stats"]["model_requests"]
    assert api.ledger(run["id"]) == []
    assert f"run {run['id']}: failed: RepeatedFailure: the model sent" in runhost_log(model_stack)


def test_parallel_tool_calls_all_run_in_order(model_stack: RunningStack, model_server: str) -> None:
    api, run, sent = completed_scenario(model_stack, model_server, "parallel")
    assert len(sent) == 2 == run["stats"]["model_requests"]
    assert run["stats"]["steps"] == 4, "three calls of one reply, then finish"
    answers = [m for m in sent[1]["body"]["messages"] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in answers] == ["par-0", "par-1", "par-2"]
    assert "notes/parallel.md" in api.files(run["id"])
    listed = [r for r in api.ledger(run["id"]) if r["stage"] == "listed"]
    assert listed and listed[0]["ref"]["kind"] == "publication"


def test_a_200_with_an_error_body_is_retried(model_stack: RunningStack, model_server: str) -> None:
    api, run, sent = completed_scenario(model_stack, model_server, "errorbody")
    assert len(sent) == 3 and sent[0]["status"] == 200 and sent[0]["body"] == sent[1]["body"]
    assert run["stats"]["model_requests"] == 2
    assert [r["stage"] for r in api.ledger(run["id"])] == ["listed"]


@pytest.mark.waits
def test_a_minute_of_503_is_ridden_out(model_stack: RunningStack, model_server: str) -> None:
    api, run, sent = completed_scenario(model_stack, model_server, "outage:60", timeout=240)
    refused = [r for r in sent if r["status"] == 503]
    assert len(refused) >= 2 and len(sent) == len(refused) + 2
    assert all(r["body"] == sent[0]["body"] for r in refused), "a retry is the same request"
    assert run["stats"]["model_requests"] == 2
    assert [r["stage"] for r in api.ledger(run["id"])] == ["listed"]


def test_a_cancel_stops_a_trickling_request(model_stack: RunningStack, model_server: str) -> None:
    api = Api(model_stack)
    ws = seeded_workspace(api)
    question = f"scenario:trickle {uuid.uuid4().hex[:8]}"
    run = api.start_run(ws, question, model="openai")
    probe(lambda: requests_of(model_server, question), timeout=60)
    api.ok("POST", f"/v1/runs/{run['id']}/cancel")
    # The whole-request deadline is two minutes: only the cancel watcher ends the run within this probe.
    run = api.wait_run(run["id"], timeout=60)
    assert run["status"] == "cancelled" and run["publication"] is None
    assert len(requests_of(model_server, question)) == 1
    assert run["stats"]["model_requests"] == 0 and api.ledger(run["id"]) == []
    assert "Task was destroyed but it is pending" not in runhost_log(model_stack)


def test_a_new_run_reads_and_cites_the_sources_after_40_earlier_runs(
    model_stack: RunningStack, model_server: str
) -> None:
    api = Api(model_stack)
    ws = sourced_workspace(api)
    question = "How good is the liquidity of Fund X?"
    earlier = [api.start_run(ws, question, model="scripted:quick")["id"] for _ in range(40)]
    for run_id in earlier:
        assert api.wait_run(run_id, timeout=180)["status"] == "completed"
    # Each earlier run added its publication (its report artifact is no catalog item): 40 beside 3 sources.
    api.wait_catalog(ws, 43, timeout=60)

    run, asked = scenario_run(api, ws, "catalog")
    read_and_cited_the_sources(api, run)
    catalog = run["catalog"]
    assert catalog["omitted"] == 43 - len(catalog["items"]) and not [
        i for i in catalog["items"] if i["kind"] == "artifact"
    ]
    # The analyst's sources lead, however many runs have published.
    assert [i["id"] for i in catalog["items"][:3]] == ["fundx-2", "fundx-1", "fundx-0"]
    assert "catalog.md" in api.files(run["id"])
    sent = requests_of(model_server, asked)
    assert len(sent) == 5 == run["stats"]["model_requests"], "list, read catalog.md, search, read, finish"
    listed = sent[1]["body"]["messages"][-2]["content"]
    assert listed.startswith("[catalog.md]") and len(listed) < 1000


def message_chars(body: dict[str, Any]) -> int:
    """The message text of one request, as the model reads it: contents and call arguments."""
    total = 0
    for message in body["messages"]:
        total += len(message.get("content") or "")
        total += sum(len(c["function"]["arguments"]) for c in message.get("tool_calls") or [])
    return total


def test_a_long_run_never_sends_more_than_3000_chars(model_stack: RunningStack, model_server: str) -> None:
    """Sixty steps over a catalog of 40 long titles, each a search, a page of catalog.md and a long note:
    the working files grow, every request stays bounded."""
    api = Api(model_stack)
    ws = api.workspace()
    for i in range(40):
        api.publish(f"Fund X liquidity and redemption report number {i:03d} " * 3, f"Report {i}.", ws["id"])
    api.wait_catalog(ws["id"], 40)
    run, question = scenario_run(api, ws["id"], "pages:20", timeout=300)
    assert run["status"] == "completed", run["error"]
    assert sum(p.startswith("notes/") for p in api.files(run["id"])) == 20
    sent = requests_of(model_server, question)
    assert len(sent) == run["stats"]["model_requests"] >= 60
    sizes = [message_chars(r["body"]) for r in sent]
    assert max(sizes) <= 3_000, sizes
    assert run["stats"]["model_input_chars_max"] == max(sizes)


def test_an_earlier_publication_the_catalog_omits_is_found_by_search_and_read(
    model_stack: RunningStack, model_server: str
) -> None:
    api = Api(model_stack)
    ws = api.workspace()
    memo = api.publish(
        "Fund X redemption gate memo",
        "The redemption gate of Fund X was lifted in March, once the liquidity buffer was restored.",
        ws["id"],
    )
    for n in range(60):
        api.publish(f"Quarterly note {n}", f"Quarter {n}: nothing new on the fund.", ws["id"])
    api.wait_catalog(ws["id"], 61, timeout=60)

    run, question = scenario_run(api, ws["id"], "earlier")
    assert run["status"] == "completed", run["error"]
    # The memo is the oldest of 61 publications and its title shares no word with the question: off the page.
    assert run["catalog"]["omitted"] > 0 and memo["id"] not in {i["id"] for i in run["catalog"]["items"]}
    sent = requests_of(model_server, question)
    assert len(sent) == 3 == run["stats"]["model_requests"], "search, read the memo, finish"
    found = sent[1]["body"]["messages"][-2]["content"]
    assert f"- [publication] {memo['id']}@1 'Fund X redemption gate memo'" in found
    stages = [(r["stage"], r["ref"]["id"]) for r in api.ledger(run["id"]) if r["ref"]]
    assert ("listed", memo["id"]) in stages and ("read", memo["id"]) in stages
    published = api.read(run["publication"])
    assert [s["id"] for s in published["sources"]] == [memo["id"]]
    assert f"{memo['id']}@1" in published["body"]


def stopped_at_a_limit(
    api: Api, url: str, name: str, limits: dict[str, int], limit: str, value: int
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A run of the scenario `name` admitted with `limits`, checked to have failed at `limit` (whose value is
    `value`) having published nothing, and the requests the model server at `url` got for it."""
    ws = seeded_workspace(api)
    question = f"scenario:{name} {uuid.uuid4().hex[:8]}"
    run = api.wait_run(api.start_run(ws, question, model="openai", limits=limits)["id"])
    assert (run["status"], run["error"], run["error_details"]) == (
        "failed",
        "limit_reached",
        {"limit": limit, "value": value},
    )
    assert run["publication"] is None
    catalog = api.ok("GET", f"/v1/workspaces/{ws}/catalog?limit=200")["items"]
    assert [i for i in catalog if i["run_id"] == run["id"]] == []
    return run, requests_of(url, question)


def test_parallel_calls_past_the_step_limit_are_cut_to_the_steps_left(
    model_stack: RunningStack, model_server: str
) -> None:
    """A reply of three calls with two steps left runs two: the limit holds within one answer."""
    api = Api(model_stack)
    run, sent = stopped_at_a_limit(api, model_server, "parallel", {"max_steps": 2}, "max_steps", 2)
    assert len(sent) == 1 == run["stats"]["model_requests"] and run["stats"]["steps"] == 2
    assert "catalog.md" in api.files(run["id"]) and "notes/parallel.md" not in api.files(run["id"])


def test_a_model_that_never_finishes_fails_at_its_model_request_limit(
    model_stack: RunningStack, model_server: str
) -> None:
    """Paid requests stop at the run's limit: the run fails saying so, publishes nothing, keeps its notes."""
    api = Api(model_stack)
    run, sent = stopped_at_a_limit(api, model_server, "endless", {"max_model_requests": 4}, "max_model_requests", 4)
    assert len(sent) == 4 == run["stats"]["model_requests"]
    assert {"plan.md", "notes/n0.md"} <= set(api.files(run["id"]))


def test_a_model_reading_the_same_again_and_again_is_stopped_early(
    model_stack: RunningStack, model_server: str
) -> None:
    """Each re-read is answered with what it read and a word that it is one; five in a row end the run, long
    before its step limit."""
    api = Api(model_stack)
    run, sent = stopped_at_a_limit(api, model_server, "reread", {"max_steps": 40}, "max_rereads", 5)
    assert len(sent) == 7 == run["stats"]["model_requests"], "list, read catalog.md, five reads of it again"
    first, again = (sent[n]["body"]["messages"][-2]["content"] for n in (2, 3))
    assert first.startswith("[catalog.md chars 0-")
    assert again.startswith("(already read: this call answered the same earlier in the run; 4 more like it")
    assert "catalog.md" in api.files(run["id"])


def test_a_finish_citing_what_the_run_did_not_read_is_answered_back(
    model_stack: RunningStack, model_server: str
) -> None:
    """As an outside agent's finish is refused naming the refs it did not read at that version, the model's
    is answered back naming them; its next finish, citing what it read, is published."""
    api = Api(model_stack)
    ws = seeded_workspace(api)
    run, question = scenario_run(api, ws, "badcite")
    assert run["status"] == "completed", run["error"]
    sent = requests_of(model_server, question)
    assert len(sent) == 4 == run["stats"]["model_requests"], "search, read, a refused finish, a finish"
    pub = [r["ref"]["id"] for r in api.ledger(run["id"]) if r["stage"] == "read"]
    assert len(pub) == 1
    refused = sent[3]["body"]["messages"][-2]
    assert refused["role"] == "tool" and refused["tool_call_id"] == "bad-2"
    assert refused["content"] == (
        "error: the answer cites material this run did not read at that version"
        f" ({pub[0]}@v2, fundx-0@v1 page:1): read each first, or cite only what you read"
    )
    published = api.read(run["publication"])
    assert published["body"] == BADCITE_ANSWER.format(pub=pub[0])
    assert published["sources"] == [{"kind": "publication", "id": pub[0], "version": 1}]


CUT = re.compile(r"… \[([\d,]+) chars in all; read_file (results/\S+) offset (\d+) for the rest\]$")


def shown_answers(sent: list[dict[str, Any]]) -> list[str]:
    """The last tool answer each request's window shows (the answer to the call before it)."""
    return [str(r["body"]["messages"][-2]["content"]) for r in sent[1:]]


def test_a_cut_search_answer_points_to_the_file_whose_read_gives_the_rest(
    model_stack: RunningStack, model_server: str
) -> None:
    api = Api(model_stack)
    ws, _ = gated_workspace(api)
    run, question = scenario_run(api, ws, "searchrest")
    assert run["status"] == "completed", run["error"]
    shown = shown_answers(requests_of(model_server, question))
    cut = CUT.search(shown[0])
    assert cut is not None, shown[0][-200:]
    path, offset = cut[2], int(cut[3])
    whole = api.ok("GET", f"/v1/runs/{run['id']}/files/{path}")
    assert len(whole) == int(cut[1].replace(",", "")) and shown[0] == whole[:offset] + cut[0]
    # The run's own read_file gives the rest, part by part, each read where the one before said.
    parts = [answer.partition("\n")[2] for answer in shown[1:]]
    assert "".join(parts) == whole[offset:] and len(parts) >= 2
    assert whole.index("- [source]") < whole.index("- [publication]"), "the evidence comes first"
    # Reading a result back is no read of a source: nothing in the ledger, nothing counted as a source's text.
    assert not [r for r in api.ledger(run["id"]) if r["stage"] in ("read", "unavailable")]
    assert run["stats"]["source_chars_read"] == 0
    assert run["stats"]["model_input_chars_max"] <= 3_000


def test_every_hit_of_a_search_is_reached_through_its_pages(model_stack: RunningStack, model_server: str) -> None:
    api = Api(model_stack)
    ws, memos = gated_workspace(api)
    run, question = scenario_run(api, ws, "searchpages")
    assert run["status"] == "completed", run["error"]
    sent = requests_of(model_server, question)
    pages = []
    for answer in shown_answers(sent):
        cut = CUT.search(answer)
        pages.append(api.ok("GET", f"/v1/runs/{run['id']}/files/{cut[2]}") if cut else answer)
    passages, publications = [], []
    for page in pages:
        kinds = re.findall(r"^- \[(source|publication)\] (\S+?):? ", page, re.M)
        assert [k for k, _ in kinds] == sorted((k for k, _ in kinds), reverse=True), "passages first on each page"
        passages += [hit for kind, hit in kinds if kind == "source"]
        publications += [hit for kind, hit in kinds if kind == "publication"]
    assert len(passages) == len(set(passages)) == GATED_PAGES
    assert sorted(publications) == sorted(f"{m}@1" for m in memos), "every publication hit, each once"
    assert len(pages) > 1 and "cursor" not in pages[-1].partition("\n")[0]
    listed = {r["ref"]["id"] for r in api.ledger(run["id"]) if r["stage"] == "listed"}
    assert set(memos) <= listed and len(memos) == GATED_MEMOS > 3


def test_a_read_the_run_may_not_make_says_how_to_reach_the_item(model_stack: RunningStack, model_server: str) -> None:
    api = Api(model_stack)
    elsewhere = api.publish("Memo elsewhere", "A memo of another workspace.", api.workspace()["id"])
    ws = seeded_workspace(api)
    question = f"scenario:reach {uuid.uuid4().hex[:8]} {elsewhere['id']}"
    run = api.wait_run(api.start_run(ws, question, model="openai")["id"])
    assert run["status"] == "completed", run["error"]
    (refused, *_) = shown_answers(requests_of(model_server, question))
    assert refused.startswith(f"not found: publication {elsewhere['id']}@1 is neither in this run's catalog")
    assert "search_evidence" in refused and "read_publication" in refused, refused
    assert api.ledger(run["id"]) == [], "a read refused as not found records nothing"
