"""How a search samples each term (services/assets/evidence.py): scanned for where the statistics say the term
is common enough that a few thousand passages hold a sample of it and the index's entries cost more."""

from __future__ import annotations

import pytest

from services.assets.evidence import MAX_SCAN, sample_scans, term_share

SHARES = {"gate": 0.30, "gates": 0.25, "swing": 0.02, "o'neil": 0.5, "fund": 0.6}


def test_a_terms_share_adds_its_lexemes_and_knows_no_phrase_or_prefix() -> None:
    assert term_share("('gate') | ('gates')", SHARES) == pytest.approx(0.55)
    assert term_share("'gate' | 'fund'", SHARES) == pytest.approx(0.9)
    assert term_share("'gate' | 'fund' | 'o''neil'", SHARES) == 1.0
    assert term_share("'o''neil'", SHARES) == 0.5
    assert term_share("'unknown'", SHARES) is None
    assert term_share("'gate' <-> 'fund'", SHARES) is None
    assert term_share("'gat':*", SHARES) is None


def test_a_common_term_is_scanned_for_in_a_large_store_only() -> None:
    # 0.55 of a million passages: 550,000 index entries against about 180 passages read.
    [scan] = sample_scans(["'gate' | 'gates'"], 1_000_000, SHARES, 100)
    assert scan == round(3 * 100 / 0.55)
    # In a store of 500 passages the index's 275 entries cost less than reading the 180.
    assert sample_scans(["'gate' | 'gates'"], 500, SHARES, 100) == [None]
    # A rare term: its index entries are few; an unknown one is left to the index.
    assert sample_scans(["'swing'"], 1_000_000, SHARES, 100) == [None]
    assert sample_scans(["'unknown'"], 1_000_000, SHARES, 100) == [None]


def test_the_passages_matching_every_term_are_sampled_by_the_product_of_the_shares() -> None:
    scans = sample_scans(["'gate'", "'fund'"], 1_000_000, SHARES, 100)
    assert scans == [round(300 / 0.3), round(300 / 0.6), round(300 / 0.18)]
    # One term unknown: that sample is the index's; the known term is still scanned for.
    assert sample_scans(["'gate'", "'unknown'"], 1_000_000, SHARES, 100) == [1000, None, None]


def test_no_scan_is_longer_than_max_scan() -> None:
    """A term in 2% of the passages would need about 15,000 read for its sample: however large the store,
    the index answers for it; one in 4% is scanned for in 7,500."""
    assert 3 * 100 / SHARES["swing"] > MAX_SCAN
    assert sample_scans(["'swing'"], 1_000_000_000, SHARES, 100) == [None]
    assert sample_scans(["'swing' | 'swings'"], 1_000_000_000, SHARES | {"swings": 0.02}, 100) == [7500]
