"""Several requests of one subject in one NATS message, and their replies in one message back.

A gateway worker under load asks for many exact-version reads in the same turn of its event loop (their
proofs are even signed together, shared/proof.py `prove_batched`). Sent one message each, every read paid
for its own request and reply on the caller's socket, in the NATS server and in the owner; sent together,
a read takes a fifth or more less processor time across the stack (bench/load.py, docs/operations.md). A
subject marked `batched` in its contract (shared/contracts) is sent as a batch when more than one request
for it waits to go out (`Batcher`):

- the request: the header `Dossier-Batch: <n>` and a body of n frames, each a 4-byte big-endian length and
  one request envelope exactly as it would be sent alone (its own actor, request id, grant and proof);
- the reply: n frames in the same order, each one reply envelope exactly as it would come alone.

The owner answers every envelope of a batch as it answers one sent alone (shared/bus.py `dispatch`: the
proof of caller checked, the rule called, the outcome counted and logged), so a batch grants nothing its
envelopes would not get one by one. A batch that is not well framed, or holds more than BATCH_MAX, is
answered with one `invalid` reply envelope, not framed.

When the replies would not fit in one message (the server's max_payload: sixteen reads of bodies near their
size limit), the owner leaves the largest out until the rest fit, each as an empty frame, which no reply is.
The caller asks for those again alone, each with an envelope made anew: the owner has used up the first
one's proof, which is good once. So a request of a batched subject may be carried out twice, and only
requests that change nothing (reads) may be marked. A caller that gets back a reply it cannot split into its
n frames (an owner of an earlier release answers a batch as one malformed request) asks for each again alone
too: a request whose reply is lost is never taken for answered.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

BATCH_HEADER = "Dossier-Batch"
# Requests in one batch at most: as many as one proof signature covers (shared/proof.py MAX_BATCH).
BATCH_MAX = 16
_LENGTH = 4


class BadBatch(ValueError):
    """A batch body that is not the frames its header counts."""


def frames(parts: list[bytes]) -> bytes:
    return b"".join(len(part).to_bytes(_LENGTH, "big") + part for part in parts)


def unframe(data: bytes, count: int) -> list[bytes]:
    """The `count` frames of `data`, which must be exactly those; BadBatch otherwise."""
    if not 1 <= count <= BATCH_MAX:
        raise BadBatch(f"a batch holds 1 to {BATCH_MAX} requests, not {count}")
    parts, at, view = [], 0, memoryview(data)
    while at < len(data):
        if at + _LENGTH > len(data):
            raise BadBatch("a frame's length is cut short")
        size = int.from_bytes(view[at : at + _LENGTH], "big")
        at += _LENGTH
        if at + size > len(data):
            raise BadBatch("a frame is longer than the batch")
        parts.append(bytes(view[at : at + size]))
        at += size
        if len(parts) > count:
            break
    if len(parts) != count:
        raise BadBatch(f"the header counts {count} requests, the body holds {len(parts)} or more")
    return parts


def fitted(replies: list[bytes], limit: int) -> list[bytes]:
    """The replies, the largest made empty (ask again alone) until their frames fit in `limit` bytes."""
    size = sum(_LENGTH + len(reply) for reply in replies)
    if size <= limit:
        return replies
    kept = list(replies)
    for i in sorted(range(len(kept)), key=lambda i: len(kept[i]), reverse=True):
        size -= len(kept[i])
        kept[i] = b""
        if size <= limit:
            break
    return kept


def batch_count(header: str | None) -> int | None:
    """The count a request's batch header gives; None when it has none; BadBatch when it is not a count."""
    if header is None:
        return None
    if not header.isascii() or not header.isdigit() or len(header) > 3:
        raise BadBatch("the batch header is not a count")
    return int(header)


Send = Callable[[bytes, dict[str, str] | None], Awaitable[bytes]]
# A request's envelope made anew, with a proof of its own: a proof is used once, also by a read whose reply
# the owner left out of its batch's.
Fresh = Callable[[], Awaitable[bytes]]
Waiting = tuple[bytes, Fresh, asyncio.Future[bytes]]


class Batcher:
    """The caller's side for one subject and timeout: `request(body)` waits for the reply to that body.

    The first request of a batch schedules its sending; the requests made until that runs, two turns of the
    event loop later, go out with it (at once when BATCH_MAX wait). A gateway worker's reads resume from
    their proofs' signing in one turn (shared/proof.py `prove_batched`), so the two turns gather the reads
    of a burst. A lone request goes out as it always did, without the header.
    """

    def __init__(self, send: Send):
        self._send = send
        self._waiting: list[Waiting] = []
        self._exchanges: set[asyncio.Task[None]] = set()

    async def request(self, body: bytes, fresh: Fresh) -> bytes:
        """The reply to `body`; `fresh()` makes the request anew if it must be asked for again alone."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[bytes] = loop.create_future()
        self._waiting.append((body, fresh, future))
        if len(self._waiting) >= BATCH_MAX:
            self._start(self._take())
        elif len(self._waiting) == 1:
            loop.call_soon(self._start, None)
        return await future

    def _take(self) -> list[Waiting]:
        waiting, self._waiting = self._waiting, []
        return waiting

    def _start(self, waiting: list[Waiting] | None) -> None:
        # A task of its own, which answers every future whatever happens to the callers that wait on them.
        task = asyncio.ensure_future(self._exchange(waiting))
        self._exchanges.add(task)
        task.add_done_callback(self._exchanges.discard)

    async def _exchange(self, waiting: list[Waiting] | None) -> None:
        if waiting is None:
            # What waits when this task first runs: the requests of the turn it was made in and of the next.
            waiting = self._take()
            if not waiting:
                return  # a full batch took them
        outcomes: list[bytes | BaseException] = [b""] * len(waiting)
        try:
            if len(waiting) > 1:
                raw = await self._send(frames([body for body, _, _ in waiting]), {BATCH_HEADER: str(len(waiting))})
                try:
                    outcomes = [*unframe(raw, len(waiting))]
                except BadBatch:
                    pass  # an owner that does not know batches answered the whole as one request it could not read
            # Asked alone: a lone request as it is, one the owner left out of the batch's reply (an empty frame)
            # anew, and every one of them anew after a reply that was not the batch's frames.
            again = [i for i, outcome in enumerate(outcomes) if not outcome]
            alone = await asyncio.gather(
                *(self._alone(waiting[i], anew=len(waiting) > 1) for i in again), return_exceptions=True
            )
            for i, outcome in zip(again, alone, strict=True):
                outcomes[i] = outcome
        except BaseException as exc:
            outcomes = [exc] * len(waiting)
            if not isinstance(exc, Exception):
                _settle(waiting, outcomes)
                raise
        _settle(waiting, outcomes)

    async def _alone(self, request: Waiting, *, anew: bool) -> bytes:
        body, fresh, _ = request
        return await self._send(await fresh() if anew else body, None)


def _settle(waiting: list[Waiting], outcomes: list[bytes | BaseException]) -> None:
    for (_, _, future), outcome in zip(waiting, outcomes, strict=True):
        if future.done():
            continue  # its caller stopped waiting
        if isinstance(outcome, asyncio.CancelledError):
            future.cancel()
        elif isinstance(outcome, BaseException):
            future.set_exception(outcome)
        else:
            future.set_result(outcome)
