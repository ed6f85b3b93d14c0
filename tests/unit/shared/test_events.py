"""Event rules marked with the event they consume (shared/events.py): one declaration, checked against the contracts."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from services.workspace.app import create_app
from shared.contracts.assets import EVT_SOURCE_RETIRED, SourceRetired
from shared.contracts.common import Event
from shared.contracts.registry import consumed_by
from shared.contracts.workspace import EVT_CREATED, WorkspaceCreated
from shared.events import EventContext, consumes, event_rules, handler_for
from shared.natsauth import CONSUMES, workspace_durables
from shared.settings import WorkspaceSettings


class Retirements:
    def __init__(self) -> None:
        self.seen: list[tuple[str, SourceRetired]] = []

    @consumes(EVT_SOURCE_RETIRED)
    async def on_retired(self, ctx: EventContext, retired: SourceRetired) -> None:
        self.seen.append((ctx.scope, retired))


class Creations:
    @consumes(EVT_CREATED)
    async def on_created(self, ctx: EventContext, created: WorkspaceCreated) -> None: ...


def event(data: dict[str, Any]) -> Event:
    return Event(id="evt_1", type=EVT_SOURCE_RETIRED, scope="s1", occurred_at=datetime.now(UTC), data=data)


def test_the_workspace_follows_exactly_what_its_contracts_let_it_consume() -> None:
    runtime = create_app(WorkspaceSettings(database_url="postgresql://nobody@localhost/none"))
    assert {e.subject for e in runtime.event_rules} == set(CONSUMES["workspace"])
    assert {runtime.durable(e) for e in runtime.event_rules} == set(workspace_durables())
    # Two rules of one event run in one consumer, in the order of their objects: the association first.
    committed = next(r for e, r in runtime.event_rules.items() if e.name == "publication.committed")
    assert [type(rule.__self__).__name__ for rule in committed] == ["Associations", "DriftWatch"]  # type: ignore[attr-defined]


def test_a_mark_the_contracts_do_not_declare_or_a_declared_event_without_a_rule_is_refused() -> None:
    with pytest.raises(ValueError, match=r"workspace\.created"):
        event_rules("artifact", Creations())
    with pytest.raises(ValueError, match=r"none for .*publication\.committed"):
        event_rules("workspace", Retirements())
    assert event_rules("artifact") == {} and consumed_by("artifact") == ()


def test_a_rule_is_marked_once() -> None:
    with pytest.raises(TypeError, match="already consumes"):
        consumes(EVT_CREATED)(Retirements.on_retired)  # type: ignore[arg-type]


async def test_a_rule_gets_the_payload_model_and_a_malformed_payload_is_skipped() -> None:
    owner = Retirements()
    handle = handler_for(EVT_SOURCE_RETIRED, [owner.on_retired])
    # A field this side does not know is left out, as the producer may add more.
    await handle(None, event({"source_id": "memo", "versions": [1, 2], "added_later": True}))  # type: ignore[arg-type]
    await handle(None, event({"source_id": "memo"}))  # type: ignore[arg-type]
    assert owner.seen == [("s1", SourceRetired(source_id="memo", versions=[1, 2]))]
