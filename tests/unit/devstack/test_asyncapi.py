"""The committed AsyncAPI document is the code's: regenerated here, any difference fails."""

from __future__ import annotations

import json

from devstack import asyncapi
from shared.contracts.common import event_subject

# Subjects whose reply carries no data (an acknowledgement).
ANSWERS_NOTHING = {"dossier.runhost.files.write_plan", "dossier.runhost.external.write"}


def test_the_committed_document_matches_the_code() -> None:
    committed = asyncapi.DOCUMENT.read_text()
    assert asyncapi.render() == committed, "docs/asyncapi.json is stale: run `python -m devstack.asyncapi`"


def test_every_event_of_every_contract_is_described() -> None:
    document = json.loads(asyncapi.render())
    for contract in asyncapi.CONTRACTS:
        constants = {value for name, value in vars(contract).items() if name.startswith("EVT_")}
        own = {t for t in constants if isinstance(t, str) and t.split(".")[0] in contract.__name__.split(".")[-1]}
        assert own <= set(contract.EVENTS), (contract.__name__, own - set(contract.EVENTS))
        for event_type in contract.EVENTS:
            assert document["operations"][event_subject(event_type)]["action"] == "send"


def test_every_request_subject_has_a_typed_request_and_reply() -> None:
    document = json.loads(asyncapi.render())
    schemas = document["components"]["schemas"]
    receive = {k: v for k, v in document["operations"].items() if v["action"] == "receive"}
    assert len(receive) >= 30
    for subject, operation in receive.items():
        message = document["components"]["messages"][f"{subject}:SubscribeMessage"]
        name = message["payload"]["$ref"].split("/")[-1]
        # Each subject's own envelope: one payload for every subject described none of them.
        assert name == asyncapi._name(subject, "Request"), (subject, name)
        request = schemas[name]
        assert request["properties"]["data"] != {}, subject
        assert {"actor", "data"} <= set(request["required"]), subject
        reply_ref = operation["reply"]["messages"][0]["$ref"].split("/")[-1]
        reply = schemas[document["components"]["messages"][reply_ref]["payload"]["$ref"].split("/")[-1]]
        data = reply["properties"]["data"]
        if subject in ANSWERS_NOTHING:
            assert data["type"] == "null"
        else:
            assert data["anyOf"][0]["$ref"].startswith("#/components/schemas/"), subject


def test_no_two_contract_models_share_a_name() -> None:
    """The document names schemas by class: two models of one name would describe each other's subjects."""
    from collections import Counter

    from pydantic import BaseModel

    from shared.contracts import common, gateway, mcp

    names = Counter(
        value.__name__
        for module in (*asyncapi.CONTRACTS, common, gateway, mcp)
        for value in vars(module).values()
        if isinstance(value, type) and issubclass(value, BaseModel) and value.__module__ == module.__name__
    )
    assert [name for name, count in names.items() if count > 1] == []
