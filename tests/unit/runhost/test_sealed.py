"""A sealed run's rows (services/runhost/sealed.py): packed and unpacked to the same values, times as
datetimes again, and a ref's key equal where PostgreSQL's jsonb equality says the refs are."""

from __future__ import annotations

import hashlib
import zlib
from datetime import UTC, datetime

from services.runhost.sealed import pack, ref_key, unpack


def rows(n: int) -> list[dict[str, object]]:
    at = datetime(2026, 12, 1, 19, 16, 8, 902754, tzinfo=UTC)
    return [
        {
            "id": 1000 + i,
            "stage": ("listed", "read", "included")[i % 3],
            "ref": {"kind": "source", "id": f"liquidity-{i % 10:02d}", "version": 1},
            "content_hash": hashlib.sha256(str(i % 10).encode()).hexdigest(),
            "locator": f"docx:h=Investment committee – é;p={i}",
            "reason": None,
            "model_request": f"run_x:r{i}" if i % 3 == 2 else None,
            "at": at.replace(microsecond=i),
        }
        for i in range(n)
    ]


def test_rows_come_back_as_they_went_in() -> None:
    kept = rows(70)
    assert unpack(pack(kept)) == kept
    assert unpack(pack([])) == []


def test_a_sealed_ledger_is_a_fraction_of_its_json() -> None:
    kept = rows(70)
    document = pack(kept)
    assert len(document) * 4 < len(zlib.decompress(document))


def test_a_refs_key_ignores_the_order_of_its_fields() -> None:
    assert ref_key({"kind": "source", "id": "a", "version": 1}) == ref_key({"version": 1, "id": "a", "kind": "source"})
    assert ref_key({"kind": "source", "id": "a", "version": 1}) != ref_key({"kind": "source", "id": "a", "version": 2})
