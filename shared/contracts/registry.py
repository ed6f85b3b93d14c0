"""Every subject and event the contracts declare, read from the contract modules themselves.

The AsyncAPI document (devstack/asyncapi.py), each process's NATS permissions and the signers an owner
trusts (shared/natsauth.py, shared/proof.py) are all made from these lists, so a subject is declared once,
and so is each event a service follows (its `consumers`).
"""

from __future__ import annotations

from typing import Any

from shared.contracts import artifact, assets, publication, runhost, workspace
from shared.contracts.common import SERVICES, EventType, Subject, health_subject

CONTRACTS = (workspace, runhost, publication, artifact, assets)  # in the order of SERVICES


def contract_subjects() -> dict[str, list[Subject[Any, Any]]]:
    """Every request subject each service's contract declares, in the order it declares them, plus its health."""
    subjects: dict[str, list[Subject[Any, Any]]] = {}
    for service, contract in zip(SERVICES, CONTRACTS, strict=True):
        declared = [value for value in vars(contract).values() if isinstance(value, Subject)]
        subjects[service] = [s for s in declared if s.service == service] + [health_subject(service)]
    return subjects


def contract_events() -> list[EventType[Any]]:
    """Every event type the contracts declare, once (a module may name another's, as workspace names one of assets')."""
    events: dict[str, EventType[Any]] = {}
    for contract in CONTRACTS:
        for value in vars(contract).values():
            if isinstance(value, EventType):
                events.setdefault(value.name, value)
    return list(events.values())


def called_by(process: str) -> tuple[Subject[Any, Any], ...]:
    """The request subjects `process` may call: those whose declaration names it among their callers."""
    return tuple(s for subjects in contract_subjects().values() for s in subjects if process in s.callers)


def consumed_by(process: str) -> tuple[EventType[Any], ...]:
    """The event types `process` follows with durable consumers: those whose declaration names it among their
    consumers."""
    return tuple(event for event in contract_events() if process in event.consumers)
