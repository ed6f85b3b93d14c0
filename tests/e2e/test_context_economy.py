"""The model's input does not grow with the work: an extractive run over 30 sources of about 3,000
characters each keeps its largest input under 3,000 characters and under 0.030 of what it read, and one
over 300 small sources stays under the same bound (counts and pointers, not listings)."""

from __future__ import annotations

from typing import Any

import pytest

from services.runhost.policies.extractive import MAX_SOURCES
from tests.support.api import Api
from tests.support.stack import RunningStack

MAX_INPUT = 3_000
QUESTION = "What do the Fund X liquidity reports conclude about redemptions?"


@pytest.fixture
def api(stack: RunningStack) -> Api:
    return Api(stack)


def body_of(i: int, sentences: int) -> str:
    """Varied sentences, so each note picks its own: about 100 characters a sentence."""
    return " ".join(
        f"Report {i} finds that Fund X met redemption request {j} with {10 + (i * j) % 80}% of its liquid assets."
        for j in range(sentences)
    )


def run_over(api: Api, sources: int, sentences: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    ws = api.workspace(goal="Assess the liquidity risk of Fund X")
    bodies = [api.publish(f"Fund X liquidity report {i:03d}", body_of(i, sentences), ws["id"]) for i in range(sources)]
    api.wait_catalog(ws["id"], min(sources, 200), timeout=120)
    run = api.wait_run(api.start_run(ws["id"], QUESTION)["id"], timeout=600)
    assert run["status"] == "completed", run["error"]
    return run, bodies


def test_thirty_sources_of_three_thousand_chars_keep_the_input_under_three_percent(api: Api) -> None:
    run, bodies = run_over(api, 30, 36)
    assert all(2_800 <= len(body_of(i, 36)) <= 3_400 for i in range(30))
    stats = run["stats"]
    read = stats["source_chars_read"]
    assert read >= 30 * 2_800, "every source was read whole"
    print(f"largest input {stats['model_input_chars_max']:,} / {read:,} read, {stats['model_requests']} requests")
    assert stats["model_input_chars_max"] <= MAX_INPUT
    assert stats["model_input_chars_max"] / read <= 0.030, (stats["model_input_chars_max"], read)
    # The answer is as complete as before: every report's note is in it, with its id@version.
    answer = api.read(run["publication"])["body"]
    assert all(f"{b['id']}@1" in answer for b in bodies)
    assert sum(p.startswith("notes/") for p in api.files(run["id"])) == 30


def test_three_hundred_small_sources_keep_the_input_bounded(api: Api) -> None:
    run, _ = run_over(api, 300, 2)
    stats = run["stats"]
    assert stats["model_input_chars_max"] <= MAX_INPUT, stats
    reads = [r for r in api.ledger(run["id"]) if r["stage"] == "read"]
    assert len(reads) == MAX_SOURCES, "the run read up to its source limit"
