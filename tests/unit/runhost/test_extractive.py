"""The extractive policy's pure parts: plans, source choice, answers, BM25, the HTML report, and the calls of
one reply."""

from __future__ import annotations

from services.runhost.claims import cited
from services.runhost.policies.extractive import (
    BATCH,
    EARLIER_RUNS,
    Entry,
    ExtractivePolicy,
    choose_sources,
    compose_answer,
    compose_note,
    parse_sources,
    plan_with_sources,
    search_query,
)
from services.runhost.policies.questions import findings, unanswered_parts
from services.runhost.policies.text import bm25_scores, clip, key_sentences
from services.runhost.policies.vocabulary import ModelInput, RunView, ToolCall, ToolResult
from services.runhost.report import render_report
from tests.support.citation_forms import CITED, written

PLAN = "# Plan\n\n## Goal (v1)\nFund X liquidity\n\n## Question\nq\n\n## Sources\n(to be chosen)\n\n## Next steps\n- list\n"


def view(**kw: object) -> RunView:
    values: dict = {
        "run_id": "run_1",
        "goal_version": 2,
        "goal": "Assess Fund X liquidity",
        "question": "Do Fund X redemptions still hold?",
        "catalog": {"items": [], "complete": True, "omitted": 0},
        "history": [],
        "files": {},
        "plan": PLAN,
        "checkpoint_revision": 3,
        "results": [],
    }
    values.update(kw)
    return RunView(**values)


def item(i: str, title: str, version: int = 1, available: bool = True, run_id: str | None = None, day: int = 0) -> dict:
    return {
        "kind": "publication",
        "id": i,
        "version": version,
        "title": title,
        "created_at": f"2026-11-{day or version:02d}T00:00:00Z",
        "run_id": run_id,
        "available": available,
        "reason": None if available else "withdrawn",
    }


def test_plan_sources_round_trip() -> None:
    assert parse_sources(PLAN) is None
    v = view(
        catalog={
            "items": [
                item("pub_a", "Fund X redemptions"),
                item("pub_b", "Weather"),
                item("pub_c", "Fund X", available=False),
            ],
            "complete": True,
            "omitted": 0,
        }
    )
    chosen = choose_sources(v, [{"evidence_id": "ev1"}])
    assert [e.name for e in chosen] == ["pub_a@v1", "E-ev1"]
    plan = plan_with_sources(PLAN, chosen)
    assert parse_sources(plan) == chosen and "## Next steps\n- read each source" in plan


def test_history_selection_excludes_other_versions() -> None:
    v = view(
        history=[{"publication_id": "pub_a", "version": 1}],
        catalog={"items": [item("pub_a", "Fund X redemptions", version=2)], "complete": True, "omitted": 0},
    )
    assert [e.target for e in choose_sources(v, [])] == ["pub_a@1"]


def test_search_query_is_a_disjunction_of_terms() -> None:
    q = search_query(view())
    assert " or " in q and "redemptions" in q and "still" not in q.split(" or ")


def test_answer_has_three_parts_and_a_proposal() -> None:
    v = view(
        question="Do Fund X redemption gates hold?",
        catalog={"items": [item("pub_a", "Report A"), item("pub_z", "Unread")], "complete": False, "omitted": 7},
    )
    entries = choose_sources(
        view(catalog={"items": [item("pub_a", "Fund X redemptions")], "complete": True, "omitted": 0}),
        [{"evidence_id": "ev1"}],
    )
    body = "# Report A (pub_a@v1, 2026-11-01)\n\nFund X redemptions hold within 30 days. Other text here."
    notes = {
        "pub_a@v1": compose_note(entries[0], body, 80, 80, "fund redemptions"),
        "E-ev1": "# Note: E-ev1\nkind: evidence\ntarget: ev1\nstatus: unavailable\nreason: superseded\n",
    }
    answer, proposal = compose_answer(v, entries, notes)
    assert "## What earlier reports concluded\n- **Report A** (pub_a@1, concluded 2026-11-01)" in answer
    assert "## What the new evidence says\n- no new evidence was read" in answer
    assert "evidence ev1 was not read: superseded" in answer
    assert "7 items were omitted" in answer and "1 catalog publications were not read" in answer
    assert proposal["expected_revision"] == 3 and proposal["summary"]
    # Most of the question is not covered by what was read: the question itself stays open, asked whole.
    assert proposal["add_questions"] == ["Do Fund X redemption gates hold?"]
    assert "- no evidence read covers: gates, redemption" in answer


def test_bm25_prefers_matching_documents() -> None:
    scores = bm25_scores("liquidity gates", ["the weather is fine", "liquidity gates were introduced", "liquidity"])
    assert scores[1] > scores[2] > scores[0] == 0
    assert key_sentences(
        "Noise sentence here. Gates on liquidity were introduced today. More noise again.", "liquidity gates", count=1
    ) == ["Gates on liquidity were introduced today."]


def test_report_is_escaped_static_html() -> None:
    html = render_report("<t>", "# Title\n\n- **bold** <script>alert(1)</script>\n\ntext", run_id="run_1")
    assert "<script>" not in html and "&lt;script&gt;" in html and "<strong>bold</strong>" in html and "<ul>" in html


def test_an_empty_choice_is_a_choice() -> None:
    plan = plan_with_sources(PLAN, [])
    assert parse_sources(plan) == []
    assert parse_sources(PLAN) is None


def test_open_questions_are_the_unanswered_parts_of_the_question_never_single_words() -> None:
    question = (
        "Do Fund X redemption gates hold since the announcement, and what did the regulator say about swing"
        " pricing? What did the regulator say about swing pricing; why?"
    )
    covered = {"fund", "redemption", "gates", "announcement"}
    # "since" is not covered, but the part it is in mostly is; "why?" holds no word that says something.
    assert unanswered_parts(question, covered) == ["What did the regulator say about swing pricing?"]
    assert unanswered_parts(question, covered | {"regulator", "swing", "pricing"}) == []
    assert unanswered_parts("Since when?", set()) == []


def test_earlier_runs_answers_are_a_bounded_few_the_analysts_publications_all() -> None:
    """However many runs came before, a run reads every relevant publication of the analyst's, and of the
    runs' answers the newest to each question, the most relevant few."""
    question = "Do Fund X redemptions still hold?"
    analyst = [item("pub_a1", "Fund X redemptions memo", day=1), item("pub_a2", "Fund X liquidity note", day=1)]
    same = [item(f"pub_s{n}", question, run_id=f"run_s{n}", day=2 + n) for n in range(20)]
    other = [item(f"pub_o{n}", f"Fund X redemptions on day {n}?", run_id=f"run_o{n}", day=2 + n) for n in range(8)]
    unrelated = [item("pub_w", "Weather", run_id="run_w", day=28)]
    catalog = {"items": analyst + same + other + unrelated, "complete": True, "omitted": 0}
    chosen = [e.target for e in choose_sources(view(question=question, catalog=catalog), [{"evidence_id": "ev1"}])]
    runs = [t for t in chosen if t.startswith(("pub_s", "pub_o"))]
    assert chosen[:2] == ["pub_a1@1", "pub_a2@1"] and chosen[-1] == "ev1"
    assert len(runs) == EARLIER_RUNS and runs[0] == "pub_s19@1", "the newest answer to this very question first"
    assert not any(t.startswith("pub_s") for t in runs[1:]), "one answer per question"
    assert "pub_w@1" not in chosen


def test_an_answer_quoting_an_earlier_answer_cites_only_what_the_run_read() -> None:
    """An earlier answer cites what its run read; the sentences quoted from it cite none of that (in any form
    a reader would see as a citation), only the answer read, and the evidence read, are cited."""
    q = "Do Fund X redemptions still hold?"
    earlier = "pub_e"
    entries = choose_sources(
        view(question=q, catalog={"items": [item(earlier, q, run_id="run_0")], "complete": True, "omitted": 0}),
        [{"evidence_id": "ev1"}],
    )
    quoted = " ".join(f"Fund X redemptions still hold, {written(form, 'old')}" for form in CITED.values())
    body = f"# {q} pub_x@2 (pub_e@v1, 2026-11-01)\n\n{quoted}\n- **Redemptions** (pub_old@3, concluded x): hold."
    passage = "# announcement@v1 page:1\n\nFund X redemptions still hold at 10 percent (pub_old@1)."
    notes = {
        "pub_e@v1": compose_note(entries[0], body, len(body), len(body), q),
        "E-ev1": compose_note(entries[1], passage, len(passage), len(passage), q),
    }
    answer, _ = compose_answer(view(question=f"{q} (after pub_old@4)"), entries, notes)
    assert "redemptions still hold" in answer
    known = {("announcement", 1): ["page:1"]}
    assert [c.key for c in cited(answer, known)] == [
        ("publication", "pub_e", 1, None),
        ("source", "announcement", 1, "page:1"),
    ]


def test_a_long_sentence_is_cut_at_a_word_and_never_inside_a_citation() -> None:
    sentence = "Fund X met its redemptions " + "within the stated notice period " * 7 + "(fundx@1 page:2) and more."
    cut = clip(sentence, 230)
    assert cut.endswith("…") and len(cut) <= 230
    assert "(" not in cut and not cut[:-1].endswith(("withi", "perio"))
    assert clip("Short enough (fundx@1 page:2).") == "Short enough (fundx@1 page:2)."


def test_an_earlier_answer_is_summarised_by_its_own_findings_not_those_it_quoted() -> None:
    earlier = (
        "# What changed for Fund X?\n\nGoal version 1.\n\n"
        "## What earlier reports concluded\n- **Report A** (pub_a@1, concluded 2026-11-01): Report A said gates hold.\n\n"
        "## What the new evidence says\n- Notice 2 page:1: Fund X lifted its redemption gate in November.\n\n"
        "## Not resolved or not read\n- nothing\n"
    )
    kept = findings(earlier)
    assert "lifted its redemption gate" in kept
    assert "Report A said gates hold" not in kept and "#" not in kept and "nothing" not in kept


def sources(n: int) -> str:
    return plan_with_sources(PLAN, [Entry(f"pub_{i}@v1", "publication", f"pub_{i}@1") for i in range(n)])


async def reply_to(v: RunView) -> list[ToolCall]:
    return (await ExtractivePolicy().next_step(ModelInput("run_1:r9", [], [], v))).calls()


async def test_sources_are_read_several_at_a_time_each_call_its_own_id() -> None:
    calls = await reply_to(view(plan=sources(12)))
    assert [(c.name, c.arguments["id"]) for c in calls] == [("read_publication", f"pub_{i}") for i in range(BATCH)]
    assert len({c.call_id for c in calls}) == BATCH


async def test_each_source_of_a_reply_goes_on_from_its_own_last_result() -> None:
    failed = ToolResult(
        "read_publication", {"id": "pub_1"}, "unavailable", ok=False, data={"path": "sources/pub_1@v1.txt"}
    )
    read = ToolResult(
        "read_file",
        {},
        "",
        data={"path": "sources/pub_2@v1.txt", "offset": 0, "end": 5, "total": 9, "body": "# Rep"},
    )
    v = view(
        plan=sources(4),
        files={"sources/pub_0@v1.txt": 9, "sources/pub_2@v1.txt": 9, "notes/pub_3@v1.md": 40},
        results=[failed, read],
    )
    calls = await reply_to(v)
    assert [(c.name, c.arguments.get("path") or c.arguments.get("source")) for c in calls] == [
        ("read_file", "sources/pub_0@v1.txt"),
        ("write_note", "pub_1@v1"),
        ("read_file", "sources/pub_2@v1.txt"),
    ]
    assert (calls[0].arguments["offset"], calls[2].arguments["offset"]) == (0, 5)
    assert "status: unavailable" in calls[1].arguments["text"]
