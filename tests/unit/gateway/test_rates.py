"""The per-token buckets the workers of a port share through one file (`SharedTokenBuckets`): two views of
the file, as two worker processes hold them, spend one bucket per token."""

from __future__ import annotations

import hashlib
from pathlib import Path

from services.gateway.transport.admission import SharedTokenBuckets


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def test_two_workers_spend_one_bucket_per_token(tmp_path: Path) -> None:
    # Nothing refills within the test: one request per thousand seconds.
    one, other = (SharedTokenBuckets(0.001, 4, tmp_path / "rates") for _ in range(2))
    taken = [(one if n % 2 else other).take(digest("alice")) for n in range(10)]
    assert taken[:4] == [0, 0, 0, 0]
    assert all(wait >= 1 for wait in taken[4:]), taken
    # Another token has a bucket of its own, whichever worker sees it.
    assert one.take(digest("bob")) == 0 and other.take(digest("bob")) == 0


def test_tokens_whose_slots_are_all_taken_give_up_the_longest_idle(tmp_path: Path) -> None:
    buckets = SharedTokenBuckets(0.001, 1, tmp_path / "rates")
    # Keys that all start at the same slot: the probe window fills, then the oldest is given up.
    keys = [f"{(n * buckets.SLOTS) + 7:016x}" + "0" * 48 for n in range(1, buckets.PROBES + 2)]
    for key in keys:
        assert buckets.take(key) == 0
    assert buckets.take(keys[-1]) >= 1  # the newest kept its (spent) bucket
    assert buckets.take(keys[0]) == 0  # the oldest was given up: a full bucket again, as an idle one would be


def test_a_key_that_is_no_hex_digest_still_has_its_bucket(tmp_path: Path) -> None:
    buckets = SharedTokenBuckets(0.001, 1, tmp_path / "rates")
    assert buckets.take("session:not-hex") == 0
    assert buckets.take("session:not-hex") >= 1
