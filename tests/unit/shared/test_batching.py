"""shared/batching.py: the frames of a batch, and a caller's requests going out together."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable

import pytest

from shared.batching import BATCH_HEADER, BATCH_MAX, BadBatch, Batcher, batch_count, fitted, frames, unframe
from shared.errors import Unreachable


def test_frames_come_back_as_they_went_in() -> None:
    parts = [b"", b"{}", b"x" * 70_000, "é".encode()]
    assert unframe(frames(parts), len(parts)) == parts


@pytest.mark.parametrize(
    ("data", "count"),
    [
        (frames([b"a", b"b"]), 3),  # fewer than counted
        (frames([b"a", b"b"]), 1),  # more than counted
        (frames([b"abc"])[:-1], 1),  # a frame cut short
        (frames([b"a"]) + b"\x00\x00", 1),  # a length cut short after the frames
        (frames([b"a"] * (BATCH_MAX + 1)), BATCH_MAX + 1),
        (b"", 0),
    ],
)
def test_anything_but_the_counted_frames_is_refused(data: bytes, count: int) -> None:
    with pytest.raises(BadBatch):
        unframe(data, count)


@pytest.mark.parametrize("header", ["", "x", "-1", "1.0", "١", "9999", " 2"])
def test_a_header_that_is_no_count_is_refused(header: str) -> None:
    with pytest.raises(BadBatch):
        batch_count(header)


def test_a_count_header() -> None:
    assert batch_count(None) is None
    assert batch_count("16") == 16


def test_replies_that_do_not_fit_leave_the_largest_out_until_the_rest_fit() -> None:
    replies = [b"a" * 10, b"b" * 40, b"c" * 30, b"d" * 5]
    assert fitted(replies, 4 * 4 + 85) == replies
    assert fitted(replies, 4 * 4 + 84) == [b"a" * 10, b"", b"c" * 30, b"d" * 5]
    assert fitted(replies, 4 * 4 + 15) == [b"a" * 10, b"", b"", b"d" * 5]
    assert fitted(replies, 4 * 4 + 4) == [b""] * 4
    assert len(frames(fitted(replies, 60))) <= 60


class Owner:
    """What the Batcher sends, and the answers: each body upper-cased, a batch frame by frame."""

    def __init__(self, *, knows_batches: bool = True, fails: bool = False, leaves_out: bytes = b"-"):
        self.sent: list[tuple[bytes, dict[str, str] | None]] = []
        self.knows_batches = knows_batches
        self.fails = fails
        self.leaves_out = leaves_out  # a body whose reply it leaves out of a batch's (too large to fit)

    async def send(self, body: bytes, headers: dict[str, str] | None) -> bytes:
        self.sent.append((body, headers))
        await asyncio.sleep(0)
        if self.fails:
            raise Unreachable("the owner is not answering")
        if headers is None:
            return body.upper()
        if not self.knows_batches:
            return b'{"ok":false}'
        parts = unframe(body, int(headers[BATCH_HEADER]))
        return frames([b"" if part == self.leaves_out else part.upper() for part in parts])


def ask(batcher: Batcher, body: bytes) -> Awaitable[bytes]:
    """A request whose envelope made anew (a new proof) shows as the body with a `+`."""

    async def anew() -> bytes:
        return body + b"+"

    return batcher.request(body, anew)


async def test_a_lone_request_goes_alone() -> None:
    owner = Owner()
    assert await ask(Batcher(owner.send), b"a") == b"A"
    assert owner.sent == [(b"a", None)]


async def test_requests_of_one_turn_go_together_and_each_gets_its_own_answer() -> None:
    owner = Owner()
    batcher = Batcher(owner.send)
    assert await asyncio.gather(*(ask(batcher, t) for t in (b"a", b"b", b"c"))) == [b"A", b"B", b"C"]
    assert owner.sent == [(frames([b"a", b"b", b"c"]), {BATCH_HEADER: "3"})]


async def test_a_full_batch_goes_at_once_and_the_rest_after() -> None:
    owner = Owner()
    batcher = Batcher(owner.send)
    bodies = [str(n).encode() for n in range(BATCH_MAX + 2)]
    assert await asyncio.gather(*(ask(batcher, b) for b in bodies)) == bodies
    assert [h for _, h in owner.sent] == [{BATCH_HEADER: str(BATCH_MAX)}, {BATCH_HEADER: "2"}]


async def test_an_owner_that_knows_no_batches_is_asked_again_one_by_one() -> None:
    owner = Owner(knows_batches=False)
    batcher = Batcher(owner.send)
    assert await asyncio.gather(ask(batcher, b"a"), ask(batcher, b"b")) == [b"A+", b"B+"]
    assert owner.sent[1:] == [(b"a+", None), (b"b+", None)]
    assert [h for _, h in owner.sent] == [{BATCH_HEADER: "2"}, None, None]


async def test_a_reply_left_out_of_the_batch_is_asked_for_again_alone() -> None:
    owner = Owner(leaves_out=b"big")
    batcher = Batcher(owner.send)
    assert await asyncio.gather(*(ask(batcher, t) for t in (b"a", b"big", b"c"))) == [b"A", b"BIG+", b"C"]
    # Made anew: the owner took the first envelope's proof, which is used once.
    assert owner.sent == [(frames([b"a", b"big", b"c"]), {BATCH_HEADER: "3"}), (b"big+", None)]


async def test_a_batch_that_fails_fails_each_caller() -> None:
    batcher = Batcher(Owner(fails=True).send)
    outcomes = await asyncio.gather(ask(batcher, b"a"), ask(batcher, b"b"), return_exceptions=True)
    assert all(isinstance(o, Unreachable) for o in outcomes)


async def test_a_caller_that_stops_waiting_leaves_the_others_their_answers() -> None:
    batcher = Batcher(Owner().send)
    gone = asyncio.ensure_future(ask(batcher, b"a"))
    staying = asyncio.ensure_future(ask(batcher, b"b"))
    await asyncio.sleep(0)
    gone.cancel()
    assert await staying == b"B"
    assert gone.cancelled()
