"""The research loop of one run under one lease: model input → policy → tool → ledger, until finish.

The model input (`context.py`) holds pointers to the run's files, not bodies, and ends with plan.md as
read from its file at this step (recitation), so a person's edit of the plan is seen at the next step.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import asyncpg

from services.runhost.attempt import RunAttempt
from services.runhost.claims import check_reads
from services.runhost.context import build_messages, initial_plan, input_chars, result_file
from services.runhost.leases import StaleLease
from services.runhost.ledger import Inclusion
from services.runhost.policies.base import Policy
from services.runhost.policies.vocabulary import ModelInput, RunView, ToolCall, ToolResult
from services.runhost.replies import Rereads, answer_back, check_repetition
from services.runhost.repository import WorkDone, WorkerRuns
from services.runhost.tool_args import TOOLS, BadArguments, FinishArgs, check_arguments
from shared import tracing
from shared.contracts.runhost import LimitName
from shared.db import Database
from shared.errors import Invalid

log = logging.getLogger("dossier.runhost.loop")


# While a model request is in flight, the run's cancel flag is checked this often.
CANCEL_POLL_SECONDS = 1.0


@dataclass
class Finished:
    answer: str
    proposal: dict[str, Any] | None


@dataclass(frozen=True)
class Stopped:
    """The run ends unfinished: cancelled, or at the limit `limit` names (whose value was `value`)."""

    limit: LimitName | None = None
    value: float | None = None


CANCELLED = Stopped()


@dataclass
class Counters:
    steps: int
    chars: int
    requests: int
    started_at: float = field(default_factory=time.monotonic)


NO_WORK = WorkDone()


class WithinSteps:
    """A policy whose answers carry no more calls than the run's steps left (`RunView.steps_left`): a reply of
    more parallel calls would pass `max_steps` within one answer. The journal keeps an answer as cut, so a
    resumed run replays it so; the calls cut are never run, as the run stops at its limit next."""

    def __init__(self, policy: Policy):
        self.policy = policy

    async def next_step(self, model_input: ModelInput) -> ToolCall:
        reply = await self.policy.next_step(model_input)
        left = model_input.view.steps_left
        if left is not None and len(reply.siblings) >= left:
            reply.siblings = reply.siblings[: max(left - 1, 0)]
        return reply


class RunLoop:
    def __init__(
        self,
        *,
        attempt: RunAttempt,
        policy: Policy,
        db: Database,
        repo: WorkerRuns,
        checkpoint_revision: int,
        same_failures: int = 3,
        max_rereads: int = 5,
        step_delay: float = 0.0,
    ):
        run = attempt.run
        self.run, self.epoch, self.policy, self.toolbox = run, attempt.epoch, WithinSteps(policy), attempt.toolbox
        self.files, self.ledger, self.db, self.repo = attempt.files, attempt.ledger, db, repo
        self.limits, self.checkpoint_revision, self.step_delay = run.limits, checkpoint_revision, step_delay
        # The same failing step this many times in a row fails the run.
        self.same_failures = same_failures
        self.rereads = Rereads(max_rereads)
        # Wall time counts from the run's first start, so a resumed run does not get a fresh clock.
        started = run.started_at
        already = (datetime.now(UTC) - started).total_seconds() if started is not None else 0.0
        self.counters = Counters(
            steps=run.steps,
            chars=run.chars_read,
            requests=run.model_requests,
            started_at=time.monotonic() - max(already, 0.0),
        )
        self.transcript: list[ToolResult] = []
        self.pending: list[Inclusion] = []
        self.cancel_seen = False
        self.journal = attempt.journal

    async def _bump(self, work: WorkDone = NO_WORK) -> bool:
        """Count work under the fence; returns whether a cancel was requested."""
        async with self.db.statement() as conn:
            row = await self.repo.add_counters(conn, run_id=self.run.id, epoch=self.epoch, work=work)
        if row is None:
            raise StaleLease(self.run.id)
        self.counters.steps, self.counters.chars, self.counters.requests = (
            row["steps"],
            row["chars_read"],
            row["model_requests"],
        )
        self.cancel_seen = bool(row["cancel_requested"])
        return self.cancel_seen

    def _limit_reached(self) -> Stopped | None:
        limits, counters = self.limits, self.counters
        if counters.steps >= limits.max_steps:
            return Stopped("max_steps", limits.max_steps)
        if counters.chars >= limits.max_chars:
            return Stopped("max_chars", limits.max_chars)
        if limits.max_model_requests is not None and counters.requests >= limits.max_model_requests:
            return Stopped("max_model_requests", limits.max_model_requests)
        if time.monotonic() - counters.started_at >= limits.max_seconds:
            return Stopped("max_seconds", limits.max_seconds)
        return None

    async def run_until_done(self) -> Finished | Stopped:
        await self.ledger.load()
        if self.journal is not None:
            self.transcript = await self.journal.transcript()
            self.rereads.replay(self.transcript)
        if "plan.md" not in await self.files.listing():
            await self.files.write("plan.md", initial_plan(self.run))
        if self.journal is not None:
            # An earlier attempt stopped amid the calls of one answer: run the rest, as it would have.
            rest = await self.journal.unfinished()
            if rest:
                ended = await self._run_calls(rest)
                if ended is not None:
                    return ended
        # Whether the counters and the cancel flag were just read back under the fence, by the last call's count.
        counted = False
        while True:
            if self.cancel_seen if counted else await self._bump():
                return CANCELLED
            limit = self._limit_reached()
            if limit is not None:
                return limit
            model_input = await self._model_input()
            await self.ledger.included(self.pending, model_request=model_input.request_id)
            self.pending = []
            remaining = self.limits.max_seconds - (time.monotonic() - self.counters.started_at)
            try:
                async with asyncio.timeout(max(remaining, 0.01)):
                    reply = await self._ask_unless_cancelled(model_input)
            except TimeoutError:
                return Stopped("max_seconds", self.limits.max_seconds)
            if reply is None:
                return CANCELLED
            calls = reply.calls()
            # A replayed answer was counted by the attempt that got it; only the model's own answers count.
            fresh = not reply.replayed
            step = WorkDone(
                steps=len(calls) if fresh else 0,
                requests=1 if fresh else 0,
                input_chars=input_chars(model_input.messages) if fresh else 0,
                tokens_in=reply.tokens_in if fresh else None,
                tokens_out=reply.tokens_out if fresh else None,
            )
            cancelled = await self._bump(step)
            if cancelled:
                return CANCELLED
            ended = await self._run_calls(calls)
            if ended is not None:
                return ended
            counted = bool(calls)
            check_repetition(self.transcript, self.same_failures)

    async def _run_calls(self, calls: list[ToolCall]) -> Finished | Stopped | None:
        """The calls of one answer, in order, each journaled as it ends (a resumed attempt runs the rest); a
        run that has read again what it had, `max_rereads` times in a row, stops there."""
        for position, call in enumerate(calls):
            if self.step_delay:
                # Between the model's answer and a tool: where a crash costs a model call without a journal.
                await asyncio.sleep(self.step_delay)
            outcome = await self._run_call(call)
            if isinstance(outcome, Finished):
                if position < len(calls) - 1:
                    log.warning("run %s: %d calls after finish not run", self.run.id, len(calls) - position - 1)
                return outcome
            result, inclusions = outcome
            await self._keep_whole(result)
            await self._bump(WorkDone(chars=len(result.text), source_chars=int(result.data.get("fresh_chars", 0))))
            self.rereads.see(result)
            self.pending.extend(inclusions)
            self.transcript.append(result)
            if self.journal is not None:
                await self.journal.result(result)
            if self.rereads.looping:
                return Stopped("max_rereads", self.rereads.limit)
        return None

    async def _keep_whole(self, result: ToolResult) -> None:
        """A long answer is kept whole in the run's files before the window can cut it: the cut points there.
        Its name is the call's place in the run, which the journal's transcript keeps across a resume."""
        path = result_file(result, len(self.transcript) + 1)
        if path is not None:
            await self.files.write(path, result.text)
            result.data["result_path"] = path

    async def _run_call(self, call: ToolCall) -> Finished | tuple[ToolResult, list[Inclusion]]:
        if call.problem:
            return answer_back(call), []
        if call.name == "finish":
            outcome = await self._finish(call)
            return outcome if isinstance(outcome, Finished) else (outcome, [])
        return await self.toolbox.execute(call)

    async def _ask_unless_cancelled(self, model_input: ModelInput) -> ToolCall | None:
        """The model's answer, or None when the run was cancelled while the request was in flight."""
        ask = asyncio.create_task(self._ask(model_input))
        # Looking at the cancel flag every second is upkeep, not work: untraced.
        with tracing.untraced():
            watch = asyncio.create_task(self._watch_cancel())
        try:
            await asyncio.wait({ask, watch}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (ask, watch):
                task.cancel()
            await asyncio.gather(ask, watch, return_exceptions=True)
        if ask.done() and not ask.cancelled():
            return ask.result()
        watch.result()
        return None

    async def _watch_cancel(self) -> None:
        while True:
            await asyncio.sleep(CANCEL_POLL_SECONDS)
            try:
                async with self.db.statement() as conn:
                    cancelled = await self.repo.cancel_state(conn, run_id=self.run.id, epoch=self.epoch)
            except (OSError, asyncpg.PostgresError):
                continue  # a database blip is no reason to drop the model's answer; the next look decides
            if cancelled is None:
                raise StaleLease(self.run.id)
            if cancelled:
                return

    async def _ask(self, model_input: ModelInput) -> ToolCall:
        if self.journal is None:
            return await self.policy.next_step(model_input)
        return await self.journal.ask(self.policy, model_input)

    async def _finish(self, call: ToolCall) -> Finished | ToolResult:
        """A finish with a usable answer ends the loop; any other is answered back to the model. An answer
        citing what the run did not read at that version is not usable: the model is told which refs, as an
        outside agent's finish is refused naming them (services/runhost/external.py)."""
        data: dict[str, Any] = {}
        try:
            args = check_arguments(FinishArgs, "finish", call.arguments)
        except BadArguments as exc:
            problem = str(exc)
        else:
            answer = args.answer.strip()
            try:
                if not answer:
                    raise Invalid("finish needs a non-empty answer")
                await self._check_citations(answer)
            except Invalid as exc:
                problem = exc.message
                if "refs" in exc.details:
                    data = {"refs": exc.details["refs"]}
                    problem += f" ({', '.join(map(_named, data['refs']))}): read each first, or cite only what you read"
            else:
                proposal = args.checkpoint_proposal
                if isinstance(proposal, dict) and "expected_revision" not in proposal:
                    # The revision the run saw: the proposal applies unless someone changed it meanwhile.
                    proposal = proposal | {"expected_revision": self.checkpoint_revision}
                return Finished(answer, proposal)
        return ToolResult("finish", call.arguments, f"error: {problem}", ok=False, data=data, call_id=call.call_id)

    async def _check_citations(self, answer: str) -> None:
        async with self.db.statement() as conn:
            rows = await self.repo.list_ledger(conn, run_id=self.run.id)
        # A long answer takes a while to parse: off the loop, as the claim check does.
        await asyncio.to_thread(check_reads, answer, rows)

    async def _model_input(self) -> ModelInput:
        plan = await self.files.read("plan.md")
        view = RunView(
            run_id=self.run.id,
            goal_version=self.run.goal_version,
            goal=self.run.goal_text,
            question=self.run.question,
            catalog=self.run.catalog,
            history=self.run.history,
            files=await self.files.listing(),
            plan=plan,
            checkpoint_revision=self.checkpoint_revision,
            results=self.transcript[-400:],
            steps_left=self.limits.max_steps - self.counters.steps,
        )
        request_id = f"{self.run.id}:r{self.counters.requests + 1}"
        return ModelInput(request_id=request_id, messages=build_messages(view, self.transcript), tools=TOOLS, view=view)


def _named(ref: dict[str, Any]) -> str:
    """A ref as an answer cites it: `pub_…@vN`, or `source@vN locator`."""
    locator = f" {ref['locator']}" if ref.get("locator") else ""
    return f"{ref['id']}@v{ref['version']}{locator}"
