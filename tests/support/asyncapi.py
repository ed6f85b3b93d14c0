"""Reading docs/asyncapi.json in tests: its references, and what a message of an operation carries."""

from __future__ import annotations

import json
from typing import Any

from devstack.asyncapi import DOCUMENT

COMMITTED: dict[str, Any] = json.loads(DOCUMENT.read_text())


def resolve(ref: str, document: dict[str, Any] = COMMITTED) -> Any:
    """What a local `$ref` (`#/components/…`) points at."""
    node: Any = document
    for part in ref.removeprefix("#/").split("/"):
        node = node[part.replace("~1", "/").replace("~0", "~")]
    return node


def message(ref: str, document: dict[str, Any] = COMMITTED) -> dict[str, Any]:
    """The message an operation names (through its channel's reference to the component)."""
    found = resolve(ref, document)
    return dict(resolve(found["$ref"], document) if "$ref" in found else found)


def payload(ref: str, document: dict[str, Any] = COMMITTED) -> dict[str, Any]:
    """The schema of the payload of the message an operation names."""
    return dict(resolve(message(ref, document)["payload"]["$ref"], document))
