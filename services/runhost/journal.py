"""The model-call journal: a run never pays twice for the same model request after a crash.

Each request to a model endpoint is journaled with the sha256 of its exact input (the messages and the
tool schemas, canonical JSON) and the step the model answered (all its tool calls); the step's tool result is added once the
step ran. A resumed attempt rebuilds its context window from the journaled results, so the request it
makes next carries the same input as the one the crashed attempt made last; when that input was already
answered by an earlier attempt, the journaled answer is used and the ledger says `replayed`.

Once the run has ended, its journal is trimmed to what a resume rebuilds the model's context from
(`trimmed_entry`): each call with its long arguments shortened, each tool answer as the window shows it.
The bodies that made it long (a note's text, a read's passage, the catalog's items) are in the run's files.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from services.runhost.context import ARGUMENT_CHARS, shown_arguments, shown_text
from services.runhost.journal_repository import JournalRepository
from services.runhost.leases import StaleLease
from services.runhost.policies.base import Policy
from services.runhost.policies.vocabulary import ModelInput, ToolCall, ToolResult
from shared.db import Database


def input_hash(model_input: ModelInput) -> str:
    canonical = json.dumps(
        {"messages": model_input.messages, "tools": model_input.tools}, sort_keys=True, ensure_ascii=False
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _plain(value: dict[str, Any]) -> dict[str, Any]:
    """JSON-safe (tool data may hold values json cannot encode as they are)."""
    return dict(json.loads(json.dumps(value, default=str)))


def trimmed_entry(
    response: dict[str, Any], result: dict[str, Any] | None
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """A journal row of an ended run, cut to what the model's context was built from. Trimming it again
    changes nothing."""
    kept = None if result is None else {"batch": [_kept_result(item) for item in result.get("batch", [result])]}
    return _kept_call(response), kept


def _kept_call(record: dict[str, Any]) -> dict[str, Any]:
    return record | {
        "arguments": shown_arguments(record.get("arguments") or {}),
        "content": str(record.get("content") or "")[:ARGUMENT_CHARS],
        "siblings": [_kept_call(s) for s in record.get("siblings", [])],
    }


def _kept_result(item: dict[str, Any]) -> dict[str, Any]:
    result = ToolResult(**item)
    if result.tool:
        arguments = shown_arguments(result.arguments)
    else:  # a reply without a call: the window shows the start of what the model said
        arguments = {"content": str(result.arguments.get("content") or "")[:ARGUMENT_CHARS]}
    data = {k: v for k, v in result.data.items() if _scalar(v)}
    return result.record() | {"arguments": arguments, "text": shown_text(result), "data": data}


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, bool | int | float) or (isinstance(value, str) and len(value) <= 200)


class ModelJournal:
    def __init__(self, db: Database, run_id: str, epoch: int, repo: JournalRepository | None = None):
        self._db, self._repo = db, repo or JournalRepository()
        self.run_id, self.epoch = run_id, epoch
        self._current: int | None = None  # the journal row of the step in progress
        self._batch: list[ToolResult] = []  # the results of its calls so far

    async def transcript(self) -> list[ToolResult]:
        """The results of every journaled step, in order: the context the crashed attempt had."""
        async with self._db.statement() as conn:
            rows = await self._repo.results(conn, run_id=self.run_id)
        results: list[ToolResult] = []
        for row in rows:
            # A reply with parallel tool calls keeps their results as one batch; older rows hold one result.
            batch = row["result"].get("batch", [row["result"]])
            results.extend(ToolResult(**item) for item in batch)
        return results

    async def ask(self, policy: Policy, model_input: ModelInput) -> ToolCall:
        digest = input_hash(model_input)
        async with self._db.statement() as conn:
            earlier = await self._repo.find_earlier(conn, run_id=self.run_id, epoch=self.epoch, input_hash=digest)
        if earlier is not None:
            async with self._db.transaction() as conn:
                ok = await self._repo.append_replayed(
                    conn, run_id=self.run_id, epoch=self.epoch, request_id=earlier["request_id"], input_hash=digest
                )
            if not ok:
                raise StaleLease(self.run_id)
            self._current, self._batch = earlier["seq"], []
            return ToolCall.from_record(earlier["response"], replayed=True)
        call = await policy.next_step(model_input)
        response = call.record()
        async with self._db.transaction() as conn:
            seq = await self._repo.insert_request(
                conn,
                run_id=self.run_id,
                epoch=self.epoch,
                request_id=model_input.request_id,
                input_hash=digest,
                response=_plain(response),
            )
        if seq is None:
            raise StaleLease(self.run_id)
        self._current, self._batch = seq, []
        return call

    async def unfinished(self) -> list[ToolCall]:
        """The calls an earlier attempt left unrun of its last answer, when it ran some of them; the answer
        is recorded as replayed, and their results join that answer's journal row."""
        async with self._db.statement() as conn:
            last = await self._repo.last_entry(conn, run_id=self.run_id)
        if last is None or last["result"] is None or last["epoch"] >= self.epoch:
            return []
        calls = ToolCall.from_record(last["response"], replayed=True).calls()
        done = last["result"].get("batch", [last["result"]])
        if len(done) >= len(calls):
            return []
        async with self._db.transaction() as conn:
            ok = await self._repo.append_replayed(
                conn, run_id=self.run_id, epoch=self.epoch, request_id=last["request_id"], input_hash=last["input_hash"]
            )
        if not ok:
            raise StaleLease(self.run_id)
        self._current, self._batch = last["seq"], [ToolResult(**item) for item in done]
        return calls[len(done) :]

    async def result(self, result: ToolResult) -> None:
        """The outcome of one call of the answer that came last. An answer's results are kept together, each
        added as its call ends, so a resumed attempt knows which of its calls already ran."""
        if self._current is None:
            return
        self._batch.append(result)
        batch = _plain({"batch": [r.record() for r in self._batch]})
        async with self._db.transaction() as conn:
            ok = await self._repo.set_result(
                conn, run_id=self.run_id, epoch=self.epoch, seq=self._current, result=batch
            )
        if not ok:
            raise StaleLease(self.run_id)
