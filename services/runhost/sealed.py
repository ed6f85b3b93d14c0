"""How an ended run's ledger and file index are kept once sealed (services/runhost/retention.py): their rows
as one JSON document, deflated with zlib. Hashes and times, most of a row, are random text that only an
entropy coder packs; PostgreSQL's own TOAST compression (an LZ without one) left a sealed run at about
11 kB, zlib at under half that. The reads unfold a document into the rows the live table gave
(services/runhost/repository.py), times as datetimes again."""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

# The fields of a sealed ledger row that are times.
_TIMES = ("at",)


def pack(rows: Iterable[Mapping[str, Any]]) -> bytes:
    entries = [{k: v.isoformat() if isinstance(v, datetime) else v for k, v in row.items()} for row in rows]
    return zlib.compress(json.dumps(entries, separators=(",", ":")).encode("utf-8"), 9)


def unpack(data: bytes) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = json.loads(zlib.decompress(data))
    for entry in entries:
        for name in _TIMES:
            if isinstance(entry.get(name), str):
                entry[name] = datetime.fromisoformat(entry[name])
    return entries


def ref_key(ref: Any) -> str:
    """A ref as one string, equal where the JSON values are (PostgreSQL's jsonb equality, key order aside)."""
    return json.dumps(ref, sort_keys=True)
