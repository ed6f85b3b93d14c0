"""A reply of parallel calls is cut to the steps the run has left (services/runhost/loop.py `WithinSteps`), so
no answer passes the run's max_steps limit, whatever number of calls the model sent in it."""

from __future__ import annotations

import pytest

from services.runhost.loop import WithinSteps
from services.runhost.policies.vocabulary import ModelInput, ToolCall
from tests.unit.runhost.test_extractive import view


class Three:
    async def next_step(self, model_input: ModelInput) -> ToolCall:
        first, *rest = (ToolCall("write_note", {"source": f"s{i}", "text": "t"}, call_id=f"c{i}") for i in range(3))
        first.siblings = rest
        return first


@pytest.mark.parametrize(
    ("left", "ids"),
    [(None, ["c0", "c1", "c2"]), (5, ["c0", "c1", "c2"]), (3, ["c0", "c1", "c2"]), (2, ["c0", "c1"]), (1, ["c0"])],
)
async def test_a_reply_keeps_its_first_calls_up_to_the_steps_left(left: int | None, ids: list[str]) -> None:
    reply = await WithinSteps(Three()).next_step(ModelInput("run_1:r1", [], [], view(steps_left=left)))
    assert [c.call_id for c in reply.calls()] == ids
