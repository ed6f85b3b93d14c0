"""Text no database can store: U+0000 (PostgreSQL refuses it) and lone surrogates (no UTF-8 encoding).

Such text is bad input, never a fault (CONTRACT "Errors"): the gateway's edge and the bus envelope both
refuse it as `invalid`, naming the field where it was found.
"""

from __future__ import annotations

import re
from typing import Any

from shared.errors import Invalid

# json.loads joins a valid surrogate pair into one code point, so any surrogate left in a str is lone.
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def unstorable_field(value: Any, path: str = "") -> str | None:
    """The dotted path of the first string (or key) holding unstorable text, else None."""
    if isinstance(value, str):
        return (path or "body") if _UNSTORABLE.search(value) else None
    if isinstance(value, dict):
        for key, item in value.items():
            here = f"{path}.{key}" if path else str(key)
            if isinstance(key, str) and _UNSTORABLE.search(key):
                return path or "body"
            found = unstorable_field(item, here)
            if found is not None:
                return found
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            found = unstorable_field(item, f"{path}.{index}" if path else str(index))
            if found is not None:
                return found
    return None


def require_storable(value: Any, path: str = "") -> None:
    field = unstorable_field(value, path)
    if field is not None:
        raise Invalid(f"{field}: text with U+0000 or a lone surrogate cannot be stored", {"field": field})
