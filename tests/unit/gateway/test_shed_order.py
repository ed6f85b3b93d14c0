"""The order in which the gateway closes connections to make room (services.gateway.transport.connections)."""

from __future__ import annotations

from dataclasses import dataclass

from services.gateway.transport.connections import KNOWN_WAITING, UNKNOWN_BODY, UNKNOWN_WAITING, ShedOrder


@dataclass(eq=False)
class Conn:
    peer: str


def test_bodies_of_unknown_callers_go_first_then_the_longest_waiting() -> None:
    order = ShedOrder()
    known, waiting, drained, later = Conn("a"), Conn("a"), Conn("b"), Conn("b")
    for conn in (known, waiting, drained, later):
        order.join(conn)  # type: ignore[arg-type]
    order.put(known, KNOWN_WAITING)  # type: ignore[arg-type]
    order.put(waiting, UNKNOWN_WAITING)  # type: ignore[arg-type]
    order.put(drained, UNKNOWN_BODY)  # type: ignore[arg-type]
    order.put(later, UNKNOWN_BODY)  # type: ignore[arg-type]
    assert order.first() is drained
    order.put(drained, UNKNOWN_BODY)  # entering its line again: to the end of it
    assert order.first() is later
    order.drop(later)
    order.drop(drained)
    assert order.first() is waiting
    order.put(waiting, None)  # a request in progress for a caller with a token: never closed for room
    assert order.first() is known
    order.drop(known)
    assert order.first() is None


def test_a_peer_makes_room_among_its_own_connections_only() -> None:
    order = ShedOrder()
    theirs, mine = Conn("a"), Conn("b")
    order.join(theirs)  # type: ignore[arg-type]
    order.join(mine)  # type: ignore[arg-type]
    order.put(theirs, UNKNOWN_BODY)  # type: ignore[arg-type]
    order.put(mine, KNOWN_WAITING)  # type: ignore[arg-type]
    assert order.first("b") is mine and order.first("a") is theirs and order.first("c") is None
    order.drop(mine)
    order.forget("b")
    assert order.first("b") is None and order.first() is theirs
