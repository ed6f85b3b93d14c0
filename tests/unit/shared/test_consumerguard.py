"""The consumer guard's rule: only `ext-*` pull consumers, named in the subject and nowhere else."""

from __future__ import annotations

import json
from typing import Any

import pytest

from shared.consumerguard import Refusal, explained, forward_subject
from shared.outside import MAX_CONSUMERS_DEFAULT, MAX_CONSUMERS_SETTING, max_consumers

STREAM = "DOSSIER_EVENTS"


def body(**config: Any) -> dict[str, Any]:
    return {"stream_name": STREAM, "config": config}


def test_an_ext_pull_consumer_is_passed_on_in_the_form_it_came() -> None:
    assert (
        forward_subject("dossier.guard.create.ext-a", body(name="ext-a")) == f"$JS.API.CONSUMER.CREATE.{STREAM}.ext-a"
    )
    assert (
        forward_subject("dossier.guard.create.ext-a.dossier.evt.run.>", body(durable_name="ext-a"))
        == f"$JS.API.CONSUMER.CREATE.{STREAM}.ext-a.dossier.evt.run.>"
    )
    assert forward_subject("dossier.guard.durable.ext-a", body(durable_name="ext-a")) == (
        f"$JS.API.CONSUMER.DURABLE.CREATE.{STREAM}.ext-a"
    )


@pytest.mark.parametrize(
    ("subject", "request_body"),
    [
        ("dossier.guard.create.workspace_x", body(name="workspace_x")),
        ("dossier.guard.durable.ext", body()),
        ("dossier.guard.create.ext-a", body(name="workspace_x")),
        ("dossier.guard.durable.ext-a", body(durable_name="workspace_x")),
        ("dossier.guard.create.ext-a", body(deliver_subject="dossier.workspace.list")),
        ("dossier.guard.create.ext-a", {"stream_name": "OTHER", "config": {}}),
        ("dossier.guard.create.ext-a", {"stream_name": STREAM}),
        ("dossier.guard.durable.ext-a.dossier.evt.>", body()),
        ("dossier.guard.other.ext-a", body()),
    ],
)
def test_anything_else_is_refused(subject: str, request_body: dict[str, Any]) -> None:
    with pytest.raises(Refusal):
        forward_subject(subject, request_body)


def test_a_create_past_the_cap_keeps_its_error_and_says_what_sets_the_cap() -> None:
    error = {"code": 400, "err_code": 10026, "description": "maximum consumers limit reached"}
    answer = json.loads(explained(json.dumps({"type": "t", "error": error}).encode()))
    assert answer["error"]["err_code"] == 10026 and answer["error"]["code"] == 400
    assert answer["error"]["description"].startswith("maximum consumers limit reached: ")
    assert MAX_CONSUMERS_SETTING in answer["error"]["description"]
    other = json.dumps({"error": {"code": 404, "err_code": 10014, "description": "consumer not found"}}).encode()
    for untouched in (other, b'{"type": "t", "name": "ext-a"}', b"not json", b"[]"):
        assert explained(untouched) == untouched


def test_the_cap_setting() -> None:
    assert max_consumers({}) == MAX_CONSUMERS_DEFAULT
    assert max_consumers({MAX_CONSUMERS_SETTING: "7"}) == 7
    for bad in ("0", "-1", "many", "1.5"):
        with pytest.raises(SystemExit, match=MAX_CONSUMERS_SETTING):
            max_consumers({MAX_CONSUMERS_SETTING: bad})
