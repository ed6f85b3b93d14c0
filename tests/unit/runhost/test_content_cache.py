"""The run host's memory of run file texts (services/runhost/memory.py `ContentCache`): by content hash,
the most recently used kept up to a number of bytes, none over the size of one."""

from __future__ import annotations

from services.runhost.memory import ContentCache


def test_the_least_recently_used_text_goes_first_when_the_bytes_run_out() -> None:
    cache = ContentCache(limit=10, largest=6)
    cache.put("a", "aaaa", 4)
    cache.put("b", "bbbb", 4)
    assert cache.get("a") == "aaaa"  # now the most recently used
    cache.put("c", "cccc", 4)
    assert (cache.get("a"), cache.get("b"), cache.get("c"), cache.size) == ("aaaa", None, "cccc", 8)


def test_a_text_over_the_size_of_one_is_not_kept_and_a_text_kept_is_counted_once() -> None:
    cache = ContentCache(limit=100, largest=6)
    cache.put("big", "x" * 7, 7)
    cache.put("a", "aaaa", 4)
    cache.put("a", "aaaa", 4)
    assert (cache.get("big"), cache.get("a"), cache.size) == (None, "aaaa", 4)


def test_a_cache_of_no_bytes_keeps_nothing() -> None:
    cache = ContentCache(limit=0)
    cache.put("a", "aaaa", 4)
    assert (cache.get("a"), cache.size) == (None, 0)
