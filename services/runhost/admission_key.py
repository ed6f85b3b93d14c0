"""What an admission's `request_id` stands for, across releases.

A retried admission (the same scope and request_id) is the same run only if it asks the same thing; the
run row keeps a digest of what it asked. A release that adds a request field must not change what an
earlier request id means: the same request sent again after an upgrade is the same run, not a conflict.

- A run admitted now stores the digest of the fields set to something other than their defaults (the
  policy resolved), so a field a later release adds, left at its default, leaves the digest as it was.
- A run admitted by a release before that stored the digest of every field it knew, defaults included
  (`FIRST_FIELDS`); a retry matches it when it asks the same of those fields and leaves every later field
  at its default.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from shared.contracts import runhost as c

# The fields of an admission as the first releases that stored digests knew them, and of its limits.
FIRST_FIELDS = (
    "question",
    "request_id",
    "history",
    "model",
    "conversation_id",
    "limits",
    "driver",
    "lease_seconds",
    "workspace_id",
)
FIRST_LIMIT_FIELDS = ("max_steps", "max_chars", "max_seconds")


def _digest(params: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()


def admission_digest(req: c.AdmitRequest, model: str) -> str:
    """The digest a run admitted now stores: only what differs from the defaults, the policy resolved."""
    return _digest(req.model_dump(mode="json", exclude_defaults=True) | {"model": model})


def first_digest(req: c.AdmitRequest, model: str) -> str | None:
    """The digest the earlier releases stored for this request, or None when it sets a field they did not
    know (then no run of theirs asked the same)."""
    dump = req.model_dump(mode="json")
    asked = req.model_dump(mode="json", exclude_defaults=True)
    later = asked.keys() - set(FIRST_FIELDS)
    later_limits = asked.get("limits", {}).keys() - set(FIRST_LIMIT_FIELDS)
    if later or later_limits:
        return None
    params = {name: dump[name] for name in FIRST_FIELDS}
    if dump["limits"] is not None:
        params["limits"] = {name: dump["limits"][name] for name in FIRST_LIMIT_FIELDS}
    return _digest(params | {"model": model})


def same_request(stored: str, req: c.AdmitRequest, model: str) -> bool:
    """Whether a run whose row stores `stored` was admitted for this request."""
    return stored in (admission_digest(req, model), first_digest(req, model))
