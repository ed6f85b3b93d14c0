"""Text no database can store: U+0000 (PostgreSQL refuses it) and lone surrogates (no UTF-8 encoding).

Such text is bad input, never a fault (The API's error rules (docs/api.md)): the gateway's edge and the bus envelope both
refuse it as `invalid`, naming the field where it was found.
"""

from __future__ import annotations

import re
from typing import Any

from shared.errors import Invalid

# json.loads joins a valid surrogate pair into one code point, so any surrogate left in a str is lone.
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def unstorable_field(value: Any, path: str = "") -> str | None:
    """The dotted path of the first string (or key) holding unstorable text, else None.

    Walked with an explicit stack: a JSON body may nest as deep as its parser allows.
    """
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        item, here = stack.pop()
        if isinstance(item, str):
            if _UNSTORABLE.search(item):
                return here or "body"
        elif isinstance(item, dict):
            children = []
            for key, child in item.items():
                if isinstance(key, str) and _UNSTORABLE.search(key):
                    # The key itself cannot be echoed back (it may not even encode), so name its parent.
                    return here or "body"
                children.append((child, f"{here}.{key}" if here else str(key)))
            stack.extend(reversed(children))
        elif isinstance(item, list | tuple):
            stack.extend(reversed([(child, f"{here}.{i}" if here else str(i)) for i, child in enumerate(item)]))
    return None


def require_storable(value: Any, path: str = "") -> None:
    field = unstorable_field(value, path)
    if field is not None:
        raise Invalid(f"{field}: text with U+0000 or a lone surrogate cannot be stored", {"field": field})
