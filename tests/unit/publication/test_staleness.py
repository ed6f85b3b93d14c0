"""Which change a stale claim shows when several versions it cites change (services/publication/staleness.py)."""

from __future__ import annotations

from services.publication.staleness import outranks
from shared.contracts.common import Ref
from shared.contracts.publication import Stale

A1, A2, A3 = (Ref(kind="source", id="a", version=v) for v in (1, 2, 3))
B1 = Ref(kind="publication", id="pub_b", version=1)


def successor(ref: Ref, now: Ref) -> Stale:
    return Stale(ref=ref, reason="new_version", now=now, support_now="weak")


def test_a_withdrawal_or_retirement_is_never_hidden_by_a_later_successor() -> None:
    withdrawn = Stale(ref=B1, reason="withdrawn")
    assert outranks(withdrawn, successor(A1, A2))
    assert not outranks(withdrawn, Stale(ref=B1, reason="withdrawn"))  # the same again replaces itself
    assert not outranks(successor(A1, A2), Stale(ref=A1, reason="retired"))
    assert not outranks(None, successor(A1, A2))


def test_a_successor_replaces_an_older_one_of_the_same_ref_never_a_newer_one() -> None:
    assert not outranks(successor(A1, A2), successor(A1, A3))
    assert outranks(successor(A1, A3), successor(A1, A2))
    assert not outranks(successor(A1, A2), successor(A1, A2))  # a re-check replaces itself
    assert not outranks(successor(A1, A3), successor(B1, Ref(kind="publication", id="pub_b", version=2)))
