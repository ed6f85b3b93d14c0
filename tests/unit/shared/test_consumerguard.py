"""The consumer guard's rule: only `ext-*` pull consumers, named in the subject and nowhere else."""

from __future__ import annotations

from typing import Any

import pytest

from shared.consumerguard import Refusal, forward_subject

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
